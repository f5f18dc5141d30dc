"""Pictures of a program for people: SVG and PNG drawn here (no Graphviz needed), DOT.

``scene`` decides what is drawn (ops, values, Layer groups, ``cond``/``while``
frames), ``layout`` places it, and ``render_svg``, ``render_png`` and
``render_dot`` write it out.
"""

from __future__ import annotations

from dy2stat.picture import layout, render_dot, render_png, render_svg, scene
from dy2stat.picture.render_png import PngUnavailable
from dy2stat.runtime.ir import Program

__all__ = ["PngUnavailable", "dot", "png", "svg"]


def svg(program: Program, feed_names, fetch_names, depth: int | None = None) -> str:
    """The program as an SVG document; with ``depth``, each Layer that many levels
    down (``LeNet`` is 1, ``LeNet/conv1`` is 2) is drawn as one box."""
    return render_svg.render(layout.place(scene.build(program, feed_names, fetch_names, depth)))


def png(program: Program, feed_names, fetch_names, depth: int | None = None) -> bytes:
    """The same picture as PNG bytes (needs Pillow: raises PngUnavailable without it)."""
    return render_png.render(layout.place(scene.build(program, feed_names, fetch_names, depth)))


def dot(program: Program, feed_names, fetch_names, depth: int | None = None) -> str:
    """The same scene as Graphviz DOT, for those who lay it out with Graphviz."""
    return render_dot.render(scene.build(program, feed_names, fetch_names, depth))
