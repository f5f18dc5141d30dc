"""The progress display of ``Model.fit`` / ``evaluate`` / ``predict``.

``verbose=1``: a tqdm bar per epoch whose postfix shows the loss and the
metrics; ``verbose=2``: one plain line every ``log_freq`` steps and one at the
end (Paddle's ``step 10/32 - loss: 0.6931 - acc: 0.5000 - 3ms/step``);
``verbose=0``: nothing.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable

import numpy as np

__all__ = ["ProgressBar", "format_value", "format_logs"]


def format_value(value) -> str:
    """A number as ``0.1234`` (``1.2346e-05`` when tiny), a list item by item."""
    if isinstance(value, (list, tuple)):
        return " ".join(format_value(v) for v in value) if value else "-"
    if isinstance(value, np.ndarray):
        return format_value(value.reshape(-1).tolist() if value.size != 1 else value.item())
    if isinstance(value, (float, np.floating)):
        return f"{value:.4e}" if value != 0 and abs(value) < 1e-3 else f"{value:.4f}"
    return str(value)


def format_logs(values: Iterable[tuple[str, object]]) -> str:
    """``loss: 0.1234 - acc: 0.5000``."""
    return " - ".join(f"{name}: {format_value(value)}" for name, value in values)


class ProgressBar:
    """One pass over ``num`` steps (``None`` when the loader has no length).

    ``update(step, values)`` is called after each step (``step`` counts from
    1); ``finish(values)`` once at the end, with the pass's final values.
    """

    def __init__(self, num: int | None = None, verbose: int = 1, log_freq: int = 1,
                 desc: str = "", file=None):
        if verbose not in (0, 1, 2):
            raise ValueError(f"verbose must be 0, 1 or 2, got {verbose!r}")
        self.num, self.verbose = num, verbose
        self.log_freq = max(int(log_freq), 1)
        self.file = file if file is not None else sys.stdout
        self._start = time.perf_counter()
        self._step = 0
        self._bar = None
        if verbose == 1:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=num, desc=desc or None, file=self.file, leave=True,
                             dynamic_ncols=True, unit="step")

    def _per_step(self) -> str:
        if not self._step:
            return ""
        ms = (time.perf_counter() - self._start) * 1000.0 / self._step
        return f"{ms:.0f}ms/step"

    def _line(self, values) -> str:
        total = f"/{self.num}" if self.num is not None else ""
        parts = [f"step {self._step}{total}"]
        text = format_logs(values)
        if text:
            parts.append(text)
        per_step = self._per_step()
        if per_step:
            parts.append(per_step)
        return " - ".join(parts)

    def update(self, step: int, values=()) -> None:
        values = list(values)
        advanced, self._step = step - self._step, step
        if self.verbose == 1:
            if values:
                self._bar.set_postfix_str(format_logs(values), refresh=False)
            self._bar.update(advanced)
        elif self.verbose == 2 and step % self.log_freq == 0 and step != self.num:
            print(self._line(values), file=self.file, flush=True)

    def finish(self, values=()) -> None:
        values = list(values)
        if self.verbose == 1 and self._bar is not None:
            if values:
                self._bar.set_postfix_str(format_logs(values), refresh=False)
            self._bar.close()
            self._bar = None
        elif self.verbose == 2:
            print(self._line(values), file=self.file, flush=True)

    def close(self) -> None:
        """Close a tqdm bar left open (an exception in the middle of a pass)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
