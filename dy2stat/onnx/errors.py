"""The error of an export that cannot be done (importable without the onnx package)."""

from __future__ import annotations


class ExportError(ValueError):
    """An op that cannot be exported: names it, where it was built, and why.

    ``op_type``, ``reason``, and where the user's code built it (``filename``,
    ``lineno``, ``source``; None when the program does not record it) are
    attributes too."""

    def __init__(self, op_type: str, where: str, reason: str, filename: str | None = None,
                 lineno: int | None = None, source: str = ""):
        super().__init__(f"op {op_type} {where}: {reason}")
        self.op_type, self.reason = op_type, reason
        self.filename, self.lineno, self.source = filename, lineno, source
