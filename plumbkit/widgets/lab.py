"""Insert a code cell through JupyterLab's own commands, from a widget callback.

IPython's ``set_next_input`` only works from a cell's own execution (ipython/ipython#4983), so a
button cannot use it. ipylab (jupyterlab-contrib) bridges kernel and JupyterLab's command
registry; we use two stock commands: ``notebook:insert-cell-below`` (the new cell becomes the
active one) and ``notebook:replace-selection`` (writes the code into it). Where ipylab or
JupyterLab is missing (terminal IPython, classic Notebook, VS Code) :func:`insert_cell_below`
returns False and the caller falls back to the copyable code box.
"""

from __future__ import annotations

from typing import Any

INSERT_BELOW = "notebook:insert-cell-below"
REPLACE_SELECTION = "notebook:replace-selection"

_frontend: Any = None


def frontend() -> Any:
    """The kernel's one ipylab ``JupyterFrontEnd`` (None without ipylab). Create it early (when a
    widget is built) so JupyterLab has answered with its version before the first click."""
    global _frontend
    if _frontend is None:
        try:
            from ipylab import JupyterFrontEnd
        except ImportError:
            return None
        _frontend = JupyterFrontEnd()
    return _frontend


def available() -> bool:
    """True when a JupyterLab front end is connected (it reports its version through ipylab)."""
    app = frontend()
    return app is not None and bool(app.version)


def insert_cell_below(code: str) -> bool:
    """Insert ``code`` as a new cell below the active cell; False when JupyterLab is not there."""
    if not available():
        return False
    app = frontend()
    app.commands.execute(INSERT_BELOW)
    app.commands.execute(REPLACE_SELECTION, {"text": code})
    return True
