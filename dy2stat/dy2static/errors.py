"""The error the transpiler raises about user code: it names the user's file, line and source."""

from __future__ import annotations


class Dy2StaticError(Exception):
    """A problem found in user code, reported at the user's file:line with advice."""

    def __init__(
        self,
        problem: str,
        filename: str | None = None,
        lineno: int | None = None,
        source_line: str | None = None,
        advice: str | None = None,
    ) -> None:
        super().__init__(problem)
        self.problem = problem
        self.filename = filename
        self.lineno = lineno
        self.source_line = source_line
        self.advice = advice

    @classmethod
    def at(cls, origin, problem: str, advice: str | None = None) -> Dy2StaticError:
        """Build the error at an `OriginInfo` (or anything with filename/lineno/source_line)."""
        if origin is None:
            return cls(problem, advice=advice)
        return cls(problem, origin.filename, origin.lineno, origin.source_line, advice)

    def __str__(self) -> str:
        lines = []
        if self.filename is not None:
            where = f'File "{self.filename}"'
            lines.append(where if self.lineno is None else f"{where}, line {self.lineno}")
        if self.source_line:
            lines.append("    " + self.source_line.strip())
        text = self.problem.rstrip(".") + "."
        if self.advice:
            text += " " + self.advice
        lines.append(text)
        return "\n".join(lines)


class ConversionError(Dy2StaticError):
    """User code that the transpiler cannot convert (unsupported syntax, missing source)."""


class UnsupportedInBranchError(Dy2StaticError, NotImplementedError):
    """What converted code cannot do inside a tensor-dependent branch or loop (reported
    while converting, even where that branch never runs)."""


class Retrace(Exception):  # noqa: N818  (a signal, not an error)
    """Not a problem of user code: what tracing learnt makes it start a statement again
    (a branch must yield another type, a loop must carry another value)."""
