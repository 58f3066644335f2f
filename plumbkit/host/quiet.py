"""plumbkit's own output only: other libraries' log lines silenced while plumbkit runs, then restored.

TensorFlow reads its C++ log level (``TF_CPP_MIN_LOG_LEVEL``) once, when it is first imported:
:func:`before_tensorflow_import` sets it for commands that have not imported TensorFlow yet and
never touches a process where the user imported it already (no file descriptors redirected
behind the user's back). :func:`quiet` lowers the Python-side loggers (TensorFlow's, absl's,
AutoGraph's) for the duration of a call and puts them back after.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import warnings
from typing import Iterator

_LOGGERS = ("tensorflow", "absl", "cvxpy", "jax")


def before_tensorflow_import(level: str = "2") -> None:
    """Hide TensorFlow's C++ INFO and WARNING lines, if TensorFlow is not imported yet."""
    if "tensorflow" not in sys.modules:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", level)


@contextlib.contextmanager
def quiet(verbose: bool = False) -> Iterator[None]:
    """Silence TensorFlow, absl and AutoGraph warnings inside the block (nothing with ``verbose``)."""
    if verbose:
        yield
        return
    saved = {name: logging.getLogger(name).level for name in _LOGGERS}
    autograph = sys.modules.get("tensorflow")
    old_verbosity = None
    if autograph is not None:
        try:
            from tensorflow.python.autograph.utils import ag_logging
            old_verbosity = ag_logging.get_verbosity()
            ag_logging.set_verbosity(0)
        except Exception:  # noqa: BLE001 - an older or newer TensorFlow: leave AutoGraph alone
            old_verbosity = None
    for name in _LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for name, level in saved.items():
            logging.getLogger(name).setLevel(level)
        if old_verbosity is not None:
            from tensorflow.python.autograph.utils import ag_logging
            ag_logging.set_verbosity(old_verbosity)
