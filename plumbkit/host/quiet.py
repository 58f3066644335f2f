"""plumbkit's own output only: other libraries' chatter silenced while plumbkit runs, then restored.

- TensorFlow reads its C++ log level (``TF_CPP_MIN_LOG_LEVEL``) once, when it is first
  imported. :func:`before_tensorflow_import` sets it for a process plumbkit owns (the CLI)
  before anything imports TensorFlow, and never touches a process where TensorFlow is
  imported already. TF 2.21 writes a few lines before its logging reads that level (absl's
  "before InitializeLog" notice, oneDNN's banner); :func:`tensorflow_imported_quietly` imports
  TensorFlow with file descriptor 2 parked in a temporary file and gives back every line that
  is not such a notice. Only the CLI uses it: in a kernel plumbkit never redirects a file
  descriptor behind the user's back.
- :func:`quiet` lowers the Python-side loggers (TensorFlow's, absl's), AutoGraph's
  "could not transform" warnings and Python warnings raised from those libraries for the
  duration of a plumbkit operation, and puts everything back after.
- :func:`solver_verbose` tells the LP whether to let its solver print (it is silent otherwise).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import tempfile
import threading
import warnings
from typing import Iterator

#: Python loggers lowered to ERROR while plumbkit runs.
LOGGERS = ("tensorflow", "absl", "cvxpy", "jax", "h5py")
#: Python warnings raised from these modules are ignored while plumbkit runs.
WARNING_MODULES = r"(tensorflow|keras|absl|cvxpy|scipy|numpy)(\..*)?$"
#: Lines TensorFlow's C++ runtime writes at import before its log level applies.
TF_STARTUP_NOISE = re.compile(r"^(WARNING: All log messages before absl::InitializeLog\(\) is called"
                              r"|[IW]\d{4} [\d:.]+\s+\d+ \S+:\d+\]"
                              r"|To enable the following instructions:)")

_verbose_depth = 0
_verbose_lock = threading.Lock()


def before_tensorflow_import(level: str = "2") -> None:
    """Hide TensorFlow's C++ INFO and WARNING lines, if TensorFlow is not imported yet (and the
    user did not choose a level)."""
    if "tensorflow" not in sys.modules:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", level)


@contextlib.contextmanager
def _fd2_parked() -> Iterator[list[str]]:
    """Send file descriptor 2 to a temporary file for the block; yields the lines written there."""
    lines: list[str] = []
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as parked:
        os.dup2(parked.fileno(), 2)
        try:
            yield lines
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            parked.seek(0)
            lines.extend(parked.read().decode("utf-8", "replace").splitlines())


def tensorflow_imported_quietly(verbose: bool = False) -> None:
    """Import TensorFlow for a process plumbkit owns (the CLI) without its start-up notices.

    Sets the C++ log level first; lines that are not start-up notices are written back to
    stderr, so a real problem (a missing library, an error) is still seen. Does nothing with
    ``verbose`` or once TensorFlow is imported.
    """
    if verbose or "tensorflow" in sys.modules:
        return
    before_tensorflow_import()
    with _fd2_parked() as lines:
        import tensorflow  # noqa: F401
    kept = [line for line in lines if line.strip() and not TF_STARTUP_NOISE.match(line)]
    if kept:
        print("\n".join(kept), file=sys.stderr)


def solver_verbose() -> bool:
    """True inside ``quiet(verbose=True)``: the LP lets its solver print its log."""
    return _verbose_depth > 0


class _Silencer:
    """The silenced state, shared by every quiet block in the process.

    Blocks overlap across threads (a live trace in the background while a cell runs an
    optimization), so they do not nest: the first block to enter saves the loggers' levels,
    AutoGraph's verbosity and adds the warning filter; the last one to leave puts them back.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.depth = 0
        self.saved: dict[str, int] = {}
        self.saved_autograph: tuple | None = None
        self.autograph = None
        self.filter: tuple | None = None

    def enter(self) -> None:
        with self.lock:
            self.depth += 1
            if self.depth > 1:
                return
            self.saved = {name: logging.getLogger(name).level for name in LOGGERS}
            for name in LOGGERS:
                logging.getLogger(name).setLevel(logging.ERROR)
            self.autograph = _autograph()
            if self.autograph is not None:
                self.saved_autograph = (self.autograph.verbosity_level, self.autograph.echo_log_to_stdout)
                self.autograph.set_verbosity(0, False)
            # not warnings.catch_warnings(): it resets the whole filter list on exit, which is not
            # thread-safe; this one filter is added and then removed by identity
            warnings.filterwarnings("ignore", module=WARNING_MODULES)
            self.filter = warnings.filters[0]

    def leave(self) -> None:
        with self.lock:
            self.depth -= 1
            if self.depth > 0:
                return
            with contextlib.suppress(ValueError):
                warnings.filters.remove(self.filter)
                warnings._filters_mutated()  # noqa: SLF001 - what catch_warnings does on exit
            for name, level in self.saved.items():
                logging.getLogger(name).setLevel(level)
            if self.autograph is not None and self.saved_autograph is not None:
                self.autograph.verbosity_level, self.autograph.echo_log_to_stdout = self.saved_autograph
            self.saved, self.saved_autograph, self.autograph, self.filter = {}, None, None, None


_SILENCER = _Silencer()


@contextlib.contextmanager
def quiet(verbose: bool = False) -> Iterator[None]:
    """Silence TensorFlow, absl and AutoGraph chatter inside the block; put it all back after.

    With ``verbose`` nothing is silenced by this block and the solver prints its log too. Only
    what was changed is restored (a level the user sets on another logger meanwhile is kept;
    the warning filter added here is removed by identity, not by resetting the list), once the
    last overlapping block in any thread has ended.
    """
    global _verbose_depth
    if verbose:
        with _verbose_lock:
            _verbose_depth += 1
        try:
            yield
        finally:
            with _verbose_lock:
                _verbose_depth -= 1
        return
    _SILENCER.enter()
    try:
        yield
    finally:
        _SILENCER.leave()


def _autograph():
    """TensorFlow's AutoGraph logging module, if TensorFlow is imported (never imports it)."""
    if "tensorflow" not in sys.modules:
        return None
    try:
        from tensorflow.python.autograph.utils import ag_logging
    except Exception:  # noqa: BLE001 - an older or newer TensorFlow: leave AutoGraph alone
        return None
    return ag_logging
