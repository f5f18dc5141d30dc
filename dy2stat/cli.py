"""The ``dy2stat`` command line."""

from __future__ import annotations

import argparse
import sys

import dy2stat


def _demo(args) -> int:
    """The main job on built-in data: see README."""
    from dy2stat import demo  # the demo pulls in most of the framework; load it on demand

    return demo.main(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dy2stat",
        description="Write models eagerly; dy2stat turns their control flow into static programs.",
    )
    parser.add_argument("--version", action="version", version=f"dy2stat {dy2stat.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = commands.add_parser(
        "demo", help="train a small model on built-in synthetic data and report what happened"
    )
    demo.add_argument("--steps", type=int, default=200, help="training steps (default 200)")
    demo.set_defaults(run=_demo)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "run", None) is None:
        parser.print_help()
        return 0
    try:
        return args.run(args) or 0
    except (ValueError, TypeError, FileNotFoundError, RuntimeError) as exc:
        print(f"dy2stat {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
