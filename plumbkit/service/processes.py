"""Starting pinned Python processes for the tf.data service: the boot, the exit, the log.

Every process (a dispatcher, a worker, plumbkit's measuring client) is started by a small boot
snippet that pins it to its CPU set *before* TensorFlow is imported, so TensorFlow sizes its
thread pools for those cores. :func:`core_share` probes how much of a core a process gets now.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

_HERE = Path(__file__).resolve().parent
_PACKAGE_PARENT = str(_HERE.parents[1])
#: The script a server process runs (a DispatchServer or a WorkerServer).
SERVER_SCRIPT = str(_HERE / "server.py")
#: Pins the new process, then runs its main. ``sys.argv[1]`` is a JSON object of arguments.
_BOOT = """
import json, os, sys
args = json.loads(sys.argv[1])
cores = args.get("cores")
if cores and hasattr(os, "sched_setaffinity"):
    try:
        os.sched_setaffinity(0, cores)
    except OSError:
        pass
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
if args["main"] == "server":
    import runpy
    sys.argv = [args["script"], args["role"], json.dumps(args)]
    runpy.run_path(args["script"], run_name="__main__")
else:
    # Only the rooms the client needs (model, service, tfdata): not the package's __init__, which
    # would load the engine, the LP solver and plotting for nothing.
    import types
    package = types.ModuleType("plumbkit")
    package.__path__ = [os.path.join(args["package_parent"], "plumbkit")]
    sys.modules["plumbkit"] = package
    from plumbkit.service.client import client_main
    client_main(args)
"""
#: Seconds a server or the client may take to start (TensorFlow's import included).
STARTUP_SECONDS = 120.0


def can_pin() -> bool:
    """Whether this OS lets plumbkit give each process its own CPU set."""
    return hasattr(os, "sched_setaffinity") and hasattr(os, "sched_getaffinity")


def usable_cores() -> list[int]:
    return sorted(os.sched_getaffinity(0)) if can_pin() else list(range(os.cpu_count() or 1))


def package_parent() -> str:
    """The folder holding the ``plumbkit`` package (what child processes put on their path)."""
    return _PACKAGE_PARENT


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([_PACKAGE_PARENT] + rest)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def describe_exit(code: int | None) -> str:
    """How a process ended, from its return code (None: still running)."""
    if code is None:
        return "running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


def log_tail(path: Path, lines: int = 6) -> str:
    """The last useful lines of a process's log, on one line (TensorFlow's start-up chatter left out)."""
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    useful = [t for t in text if "oneDNN" not in t and "absl::InitializeLog" not in t]
    return " | ".join(useful[-lines:])


_SPIN = """
import os, sys, time
cores = [int(c) for c in sys.argv[1].split(",") if c]
if cores and hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, cores)
t0, c0 = time.perf_counter(), time.process_time()
while time.perf_counter() - t0 < float(sys.argv[2]):
    sum(range(200))
print((time.process_time() - c0) / (time.perf_counter() - t0))
"""


def core_share(cores: Sequence[int] | None, seconds: float = 0.3) -> float:
    """Share of one of ``cores`` a spinning process gets right now (about 1 when nothing else
    wants it; measured in a small process of its own, no TensorFlow)."""
    arg = ",".join(str(c) for c in cores or [])
    try:
        out = subprocess.run([sys.executable, "-c", _SPIN, arg, str(seconds)], capture_output=True, text=True,
                             timeout=30 + seconds, check=True).stdout
        return float(out.strip())
    except (subprocess.SubprocessError, ValueError, OSError):
        return float("nan")


def launch(args: dict[str, Any], log: Path, **popen: Any) -> subprocess.Popen:
    """Start the boot snippet with ``args`` (pinned to ``args["cores"]``), stderr to ``log``."""
    with open(log, "ab") as err:
        return subprocess.Popen([sys.executable, "-c", _BOOT, json.dumps(args)], env=_child_env(),
                                stderr=err, stdin=subprocess.DEVNULL, start_new_session=True, **popen)


__all__ = ["SERVER_SCRIPT", "STARTUP_SECONDS", "can_pin", "core_share", "describe_exit", "launch", "log_tail",
           "package_parent", "usable_cores"]
