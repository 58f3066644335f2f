"""One tf.data service server (a DispatchServer or a WorkerServer) as its own process.

Run by path (``python -c BOOT``, see :mod:`plumbkit.service.processes`), after the boot
code has pinned the process to its CPU set: it imports only the standard library and
TensorFlow, so TensorFlow sizes its thread pools for the cores the process may use. It prints
one JSON line when the server is up (its address and pid), then serves until SIGTERM or
SIGINT, or until its parent process is gone (no orphaned servers). A worker then exits at once;
the dispatcher stops its server first.
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import threading

#: How often the server checks that its parent is still alive.
PARENT_CHECK_SECONDS = 0.5
#: The longest the dispatcher's own stop may take before the process exits anyway.
STOP_SECONDS = 3.0


def _serve(role: str, args: dict) -> object:
    import tensorflow as tf
    service = tf.data.experimental.service
    if role == "dispatcher":
        config = service.DispatcherConfig(
            port=int(args.get("port", 0)), work_dir=args.get("work_dir"),
            fault_tolerant_mode=bool(args.get("work_dir")),
            worker_timeout_ms=args.get("worker_timeout_ms"))
        return service.DispatchServer(config)
    heartbeat = args.get("heartbeat_interval_ms")
    config = service.WorkerConfig(
        dispatcher_address=args["dispatcher"], worker_address="127.0.0.1:%port%",
        port=int(args.get("port", 0)), heartbeat_interval_ms=heartbeat,
        data_transfer_address="127.0.0.1:%dts_port%")
    return service.WorkerServer(config)


def _bound_port(server: object) -> int:
    return int(server._address.rsplit(":", 1)[1])  # noqa: SLF001 - the only way to read a port 0 bind


def main(role: str, args: dict) -> int:
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    parent = os.getppid()
    server = _serve(role, args)
    port = _bound_port(server)
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    print(json.dumps({"ready": True, "role": role, "pid": os.getpid(), "address": f"127.0.0.1:{port}",
                      "cores": cores}), flush=True)
    while not stop.is_set():
        stop.wait(PARENT_CHECK_SECONDS)
        if os.getppid() != parent:
            break
    sys.stdout.flush()
    if role == "worker":
        # No graceful stop: a WorkerServer's _stop() holds the GIL while it waits for its tasks
        # (6.6 s after an offload plan, measured), so no timeout in Python can bound it, and
        # nothing needs it: the dispatcher notices a gone worker by its heartbeat either way.
        os._exit(0)
    # The dispatcher's stop is quick (its journal is written as it goes); never let a stuck one
    # keep the process alive: faulthandler's watchdog exits without needing the GIL.
    faulthandler.dump_traceback_later(STOP_SECONDS, exit=True, file=sys.stderr)
    getattr(server, "_stop")()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1], json.loads(sys.argv[2]))
