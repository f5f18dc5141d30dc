"""Views of a program (text, JSON, DOT, SVG): names taken from a file are escaped."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from xml.etree import ElementTree

import numpy as np
import pytest

from dy2stat import picture, program_view
from dy2stat.runtime import serialize
from tests.runtime import programs as P

INJECTED = 'x", URL="javascript:alert(1)", target="_top'
ODD = ["\x1b[31mred\x1b[0m", "tab\there\nnewline", "back\\Nslash\\l", "\u202eevil", "<b>&amp;</b>"]


def hostile_program():
    """The MLP with its output named to break out of a DOT string, and odd names around it."""
    program, params = P.mlp()
    g = program.global_block()
    renames = {"y": INJECTED, "r": ODD[0], "h2": ODD[1], "h": ODD[2], "dead": ODD[3],
               "fc_0.b": ODD[4]}
    g.vars = {renames.get(n, n): v for n, v in g.vars.items()}
    for name, var in g.vars.items():
        var.name = name
    for op in g.ops:
        for slots in (op.inputs, op.outputs):
            for slot, names in slots.items():
                slots[slot] = [renames.get(n, n) for n in names]
    params = {renames.get(n, n): v for n, v in params.items()}
    return program, params


def dot_strings_and_code(text: str):
    """Split DOT text into its quoted strings (unescaped) and everything else."""
    strings, code, i = [], [], 0
    while i < len(text):
        if text[i] != '"':
            code.append(text[i])
            i += 1
            continue
        j, chars = i + 1, []
        while text[j] != '"':
            if text[j] == "\\":
                chars.append(text[j:j + 2])
                j += 2
            else:
                chars.append(text[j])
                j += 1
        strings.append("".join(chars))
        code.append("S")
        i = j + 1
    return strings, "".join(code)


def test_dot_keeps_every_name_inside_one_string():
    program, _ = hostile_program()
    text = picture.dot(program, ["x"], [INJECTED])
    strings, code = dot_strings_and_code(text)
    assert "URL" not in code and "target" not in code and "javascript" not in code
    # every attribute outside strings is one the view sets
    assert set(re.findall(r"(\w+)=", code)) <= {"rankdir", "fontname", "shape", "label",
                                               "style", "fillcolor", "color"}
    labels = [s.replace('\\"', '"').replace("\\\\", "\\") for s in strings]
    assert any(label.startswith(INJECTED[:20]) for label in labels)
    for s in strings:  # no raw control or direction characters reach Graphviz
        assert s.isprintable(), s


@pytest.mark.skipif(shutil.which("dot") is None, reason="needs Graphviz")
def test_graphviz_svg_has_no_link_from_a_name():
    program, _ = hostile_program()
    result = subprocess.run(["dot", "-Tsvg"], input=picture.dot(program, ["x"], [INJECTED]),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    svg = result.stdout
    assert "<a " not in svg and "href" not in svg
    assert "javascript:alert(1" in svg  # shown, as text
    assert "<b>" not in svg and "\x1b" not in svg and "\u202e" not in svg


SVG_ELEMENTS = {"svg", "style", "defs", "marker", "path", "rect", "g", "title", "text"}
SVG_ATTRIBUTES = {"xmlns", "width", "height", "viewBox", "id", "refX", "refY", "markerWidth",
                  "markerHeight", "orient", "d", "fill", "x", "y", "rx", "class", "data-scope",
                  "data-from", "data-to", "marker-end", "text-anchor", "style"}


def test_svg_shows_hostile_names_and_scopes_only_as_escaped_text():
    program, _ = hostile_program()
    for op, scope in zip(program.global_block().ops, [INJECTED, ODD[0], ODD[1] + "/" + ODD[3],
                                                      ODD[4], ODD[2]]):
        op.scope = scope
    text = picture.svg(program, ["x"], [INJECTED])
    assert "\x1b" not in text and "\u202e" not in text and "\t" not in text
    assert "<b>" not in text and "href" not in text and "<script" not in text
    root = ElementTree.fromstring(text)  # well-formed XML
    for element in root.iter():
        assert element.tag.split("}")[1] in SVG_ELEMENTS
        assert set(element.attrib) <= SVG_ATTRIBUTES, element.attrib
        # what the program names appears only as text, never as an id, class or style
        for key in ("id", "class", "data-from", "data-to"):
            assert re.fullmatch(r"[\w -]*", element.get(key, "")), element.attrib
    titles = [t.text for t in root.iter("{http://www.w3.org/2000/svg}title")]
    assert any(t.startswith(INJECTED + ": float32") for t in titles)
    assert any(t.startswith("\\x1b[31mred\\x1b[0m") for t in titles)
    scopes = {g.get("data-scope") for g in root.iter("{http://www.w3.org/2000/svg}g")}
    assert {INJECTED, "\\x1b[31mred\\x1b[0m", "tab\\there\\nnewline/\\u202eevil",
            "<b>&amp;</b>"} <= scopes


def test_text_view_escapes_what_a_terminal_would_interpret():
    program, params = hostile_program()
    text = program_view.text(program, ["x"], [INJECTED], params)
    assert "\x1b" not in text and "\u202e" not in text and "\t" not in text
    assert "\\x1b[31mred\\x1b[0m" in text and "\\u202eevil" in text
    assert all(line.isprintable() for line in text.splitlines())


def test_json_view_escapes_invisible_characters_and_reads_back_the_same():
    program, _ = hostile_program()
    text = program_view.json_text(program, ["x"], [INJECTED])
    assert "\u202e" not in text and "\x1b" not in text
    assert json.loads(text) == serialize.program_to_dict(program, ["x"], [INJECTED])


def test_a_hostile_program_saves_loads_and_runs_with_its_names_as_plain_text(tmp_path):
    program, params = hostile_program()
    serialize.save_model(tmp_path / "m", program, ["x"], [INJECTED], params)
    loaded, feed, fetch, _ = serialize.load_model(tmp_path / "m")
    assert fetch == [INJECTED] and set(ODD) <= set(loaded.global_block().vars)
    x = np.ones((2, 4), "float32")
    (y,) = P.run(loaded, {"x": x}, params, fetch)
    assert y.shape == (2, 3)
