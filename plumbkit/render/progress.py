"""Progress for terminals: a bar redrawn in place on a terminal, plain lines when piped.

The same ``on_progress(message, fraction)`` callback the widgets use; a log file or a CI job
gets one line per phase instead of carriage returns.
"""

from __future__ import annotations

import shutil
from typing import TextIO

BAR_WIDTH = 24


class ProgressPrinter:
    """``on_progress`` for a text stream: ``[#######.........]  30%  measuring the naive baseline``."""

    def __init__(self, stream: TextIO, *, prefix: str = "  ", tty: bool | None = None):
        self.stream = stream
        self.prefix = prefix
        self.tty = stream.isatty() if tty is None else tty
        self._last_message: str | None = None
        self._drawn = False

    def __call__(self, message: str, fraction: float, detail: str = "") -> None:
        """Show ``message`` (a phase) at ``fraction`` done; ``detail`` (live numbers) only on a
        terminal, so a log gets one line per phase."""
        fraction = max(0.0, min(1.0, fraction))
        if self.tty:
            filled = int(round(BAR_WIDTH * fraction))
            line = (f"{self.prefix}[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {100 * fraction:3.0f}%  {message}"
                    + (f" · {detail}" if detail else ""))
            width = shutil.get_terminal_size((100, 20)).columns - 1
            self.stream.write("\r" + line[:width].ljust(width))
            self._drawn = True
        elif message != self._last_message:
            self.stream.write(f"{self.prefix}[{100 * fraction:3.0f}%] {message}\n")
        self._last_message = message
        self.stream.flush()

    def close(self) -> None:
        """End the bar's line (a no-op for plain lines)."""
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False
