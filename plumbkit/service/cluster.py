"""A tf.data service on this machine: a dispatcher and workers, each its own process.

Each process is pinned to its CPU set before TensorFlow is imported (:mod:`.processes`), on
loopback addresses (127.0.0.1). :class:`ServiceCluster` runs a ``DispatchServer`` (with a
``work_dir`` for its journal) and ``WorkerServer`` s (:mod:`.server`), knows which worker died
and how, and stops them all (also at interpreter exit). plumbkit's measuring client
(:mod:`.client`) runs on the cores the cluster keeps for the client.

Note: TensorFlow 2.21's gRPC servers listen on all interfaces (``*:port``; no option narrows
it); plumbkit advertises and connects to 127.0.0.1 only.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from .client import shared_client
from .errors import LostWorker, ServiceError
from .processes import (SERVER_SCRIPT, STARTUP_SECONDS, can_pin, core_share, describe_exit, launch, log_tail,
                        usable_cores)


def cpu_sets(workers: int, cores: Sequence[int], client_cores: Sequence[int] | None = None
             ) -> tuple[list[int], list[list[int]]]:
    """(dispatcher's cores, each worker's cores): the cores not reserved for the client, one
    per worker in turn (shared when there are more workers than cores); the dispatcher, which
    only keeps metadata, shares the first worker's."""
    spare = [c for c in cores if c not in set(client_cores or ())] or list(cores)
    per_worker = [[spare[i % len(spare)]] for i in range(workers)]
    return [spare[0]], per_worker


def reachable(address: str, timeout: float = 2.0) -> bool:
    """Can a TCP connection be opened to ``address`` (``grpc://host:port`` or ``host:port``)?"""
    host, _, port = address.split("://")[-1].rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


# -- servers --------------------------------------------------------------------------------------

@dataclass
class ServerProcess:
    """One dispatcher or worker process plumbkit started."""

    role: str
    index: int
    popen: subprocess.Popen
    log: Path
    cores: list[int] | None
    address: str = ""
    retired: bool = False  # stopped on purpose, not lost

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def alive(self) -> bool:
        return self.popen.poll() is None

    def describe(self) -> str:
        name = "dispatcher" if self.role == "dispatcher" else f"worker {self.index}"
        cores = f", cores {self.cores}" if self.cores else ""
        return f"{name}: pid {self.pid}, {self.address}{cores}"


def _read_ready(proc: ServerProcess, timeout: float) -> dict[str, Any]:
    """The server's one JSON line, or ServiceError (it died, or said nothing in ``timeout`` s)."""
    stream = proc.popen.stdout
    deadline = time.monotonic() + timeout
    buffer = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([stream], [], [], 0.2)
        if ready:
            chunk = os.read(stream.fileno(), 4096)
            buffer += chunk
            if b"\n" in buffer:
                line = buffer.split(b"\n", 1)[0]
                stream.close()
                return json.loads(line)
            if not chunk:
                break
        elif not proc.alive:
            break
    what = proc.describe().split(":")[0]
    raise ServiceError(f"the tf.data service {what} did not start ({describe_exit(proc.popen.poll())}): "
                       f"{log_tail(proc.log) or 'no output'}")


class ServiceCluster:
    """A tf.data service on this machine: one dispatcher and ``workers`` workers, each its own
    process on loopback, pinned to its own CPU set where the OS allows.

    ``client_cores`` are kept free for the client (the trainer, or plumbkit's measuring client).
    ``measuring_client``: start plumbkit's measuring client with the servers, so its TensorFlow
    loads while theirs does (an offload's first measurement waited ~9 s for it on CI's machine,
    after the servers' ~7 s); False for a cluster that only serves a trainer (``plumbkit service up``).
    ``worker_timeout_ms`` is how long the dispatcher waits for a silent worker's heartbeat
    before it counts the worker as lost (workers heartbeat four times per timeout).
    Use as a context manager, or call :meth:`stop`; processes left at interpreter exit are
    stopped then.
    """

    def __init__(self, workers: int = 1, *, client_cores: Sequence[int] | None = None,
                 cores: Sequence[int] | None = None, port: int = 0, work_dir: str | None = None,
                 worker_timeout_ms: int = 1000, startup_timeout: float = STARTUP_SECONDS,
                 measuring_client: bool = True):
        if workers < 0:
            raise ValueError("workers must be >= 0")
        self.requested_workers = workers
        self.cores = list(cores) if cores is not None else usable_cores()
        self.client_cores = list(client_cores) if client_cores is not None else None
        self.port, self.worker_timeout_ms, self.startup_timeout = port, worker_timeout_ms, startup_timeout
        self.measuring_client = measuring_client
        self._own_dir = tempfile.mkdtemp(prefix="plumbkit-service-")
        self.work_dir = work_dir or os.path.join(self._own_dir, "dispatcher")
        self.dispatcher: ServerProcess | None = None
        self.workers: list[ServerProcess] = []
        self.notes: list[str] = []
        if not can_pin():
            self.notes.append("this OS does not let plumbkit pin processes to cores: they share all cores")
        self._processes: list[ServerProcess] = []
        self._on_stop: list[Callable[[], None]] = []
        self._finalizer = weakref.finalize(self, _stop_all, self._processes, self._own_dir)

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> "ServiceCluster":
        dispatcher_cores, worker_cores = cpu_sets(max(1, self.requested_workers), self.cores, self.client_cores)
        if self.measuring_client:
            shared_client(self).start_in_background()
        self.dispatcher = self._await(self._spawn("dispatcher", 0, dispatcher_cores, {
            "port": self.port, "work_dir": self.work_dir, "worker_timeout_ms": self.worker_timeout_ms}))
        self.add_workers(self.requested_workers)
        if self.client_cores is not None and any(
                c in self.client_cores for w in self.workers for c in (w.cores or ())):
            self.notes.append("not enough cores to keep the client's free: a worker shares them")
        used = sorted({c for w in self.workers for c in (w.cores or ())})
        if len({tuple(w.cores or ()) for w in self.workers}) < len(self.workers):
            self.notes.append(f"{len(self.workers)} workers share core(s) {used}: each gets a share of "
                              f"them, not a core of its own")
        return self

    def _spawn(self, role: str, index: int, cores: list[int] | None, extra: dict) -> ServerProcess:
        log = Path(self._own_dir) / f"{role}-{index}.log"
        args = {"main": "server", "script": SERVER_SCRIPT, "role": role,
                "cores": cores if can_pin() else None, **extra}
        proc = ServerProcess(role, index, launch(args, log, stdout=subprocess.PIPE), log,
                             cores if can_pin() else None)
        self._processes.append(proc)
        return proc

    def _await(self, proc: ServerProcess) -> ServerProcess:
        try:
            info = _read_ready(proc, self.startup_timeout)
        except ServiceError:
            self.stop()
            raise
        proc.address, proc.cores = info["address"], info.get("cores") or proc.cores
        return proc

    def add_workers(self, count: int = 1, cores: Sequence[Sequence[int]] | None = None) -> list[ServerProcess]:
        """Start ``count`` more workers at once (each on the next spare core in turn, or ``cores``)."""
        if self.dispatcher is None:
            raise ServiceError("start the cluster before adding workers")
        if cores is None:
            _, sets = cpu_sets(len(self.workers) + count, self.cores, self.client_cores)
            cores = sets[len(self.workers):]
        heartbeat = max(50, self.worker_timeout_ms // 4) if self.worker_timeout_ms else None
        spawned = [self._spawn("worker", len(self.workers) + i, list(c), {
            "dispatcher": self.dispatcher.address, "heartbeat_interval_ms": heartbeat})
            for i, c in enumerate(cores)]
        for proc in spawned:
            self.workers.append(self._await(proc))
        return spawned

    def add_worker(self, cores: Sequence[int] | None = None) -> ServerProcess:
        """Start one more worker (on ``cores``, or the next spare core in turn)."""
        return self.add_workers(1, None if cores is None else [cores])[0]

    def on_stop(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` when the cluster stops (before its processes end)."""
        self._on_stop.append(callback)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop every process (SIGTERM, then SIGKILL after ``timeout`` s) and remove the temp dir."""
        while self._on_stop:
            self._on_stop.pop()()
        _stop_all(self._processes, self._own_dir, timeout)

    def __enter__(self) -> "ServiceCluster":
        return self.start() if self.dispatcher is None else self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- what is running -------------------------------------------------------------------
    @property
    def address(self) -> str:
        """The dispatcher's address for ``distribute(service=...)``: ``grpc://127.0.0.1:PORT``."""
        if self.dispatcher is None:
            raise ServiceError("the cluster is not started")
        return f"grpc://{self.dispatcher.address}"

    @property
    def worker_pids(self) -> list[int]:
        return [w.pid for w in self.workers if w.alive]

    @property
    def live_workers(self) -> list[ServerProcess]:
        return [w for w in self.workers if w.alive]

    def cores_per_worker(self) -> float:
        """Cores each live worker has to itself (workers sharing a core get a share of it)."""
        live = self.live_workers
        if not live or not all(w.cores for w in live):
            return float(len(self.cores)) / max(1, len(live))
        return len({c for w in live for c in w.cores}) / len(live)

    def lost_workers(self) -> list[LostWorker]:
        """The workers plumbkit started that are no longer running (and were not retired), and how
        they ended."""
        return [LostWorker(w.index, w.pid, w.address, describe_exit(w.popen.poll()))
                for w in self.workers if not w.alive and not w.retired]

    def retire_worker(self, index: int, timeout: float = 10.0) -> None:
        """Stop worker ``index`` on purpose (SIGTERM): it is not reported as lost."""
        worker = self.workers[index]
        worker.retired = True
        if worker.alive:
            worker.popen.terminate()
            try:
                worker.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                worker.popen.kill()
                worker.popen.wait(5)

    def kill_worker(self, index: int, sig: int = signal.SIGKILL) -> None:
        """Kill worker ``index`` abruptly (to see what a lost worker does to a job)."""
        worker = self.workers[index]
        if worker.alive:
            worker.popen.send_signal(sig)
            worker.popen.wait(10)

    def worker_core_share(self, seconds: float = 0.3) -> float:
        """The smallest share of a worker's cores a spinning probe gets now (1: they are free)."""
        sets = {tuple(w.cores) for w in self.live_workers if w.cores}
        shares = [core_share(list(s), seconds) for s in sets] or [float("nan")]
        return min(shares)

    def watch(self, on_lost: Callable[[LostWorker], None], *, until: Callable[[], bool],
              interval: float = 0.25) -> None:
        """Call ``on_lost`` once for every worker that dies, until ``until()`` is true (or the
        dispatcher itself is gone, which raises ServiceError)."""
        reported: set[int] = set()
        while not until():
            for lost in self.lost_workers():
                if lost.index not in reported:
                    reported.add(lost.index)
                    on_lost(lost)
            if self.dispatcher is not None and not self.dispatcher.alive:
                raise ServiceError(f"the dispatcher {describe_exit(self.dispatcher.popen.poll())}: "
                                   f"{log_tail(self.dispatcher.log) or 'no output'}")
            time.sleep(interval)

    def describe(self) -> str:
        lines = [self.dispatcher.describe() if self.dispatcher else "dispatcher: not started"]
        lines += [w.describe() + ("" if w.alive else f" — {describe_exit(w.popen.poll())}")
                  for w in self.workers]
        return "\n".join(lines)


def _stop_all(processes: list[ServerProcess], own_dir: str, timeout: float = 5.0) -> None:
    """SIGTERM every process (workers first), wait, SIGKILL what is left; remove ``own_dir``."""
    ordered = [p for p in processes if p.role != "dispatcher"] + [p for p in processes if p.role == "dispatcher"]
    for proc in ordered:
        if proc.alive:
            try:
                proc.popen.terminate()
            except OSError:
                pass
    deadline = time.monotonic() + timeout
    for proc in ordered:
        try:
            proc.popen.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.popen.kill()
            proc.popen.wait(5)
    shutil.rmtree(own_dir, ignore_errors=True)


__all__ = ["ServerProcess", "ServiceCluster", "cpu_sets", "reachable"]
