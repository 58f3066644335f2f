"""plumbkit's measuring client: a process pinned to the client's cores that runs measurements
through the tf.data service (:func:`plumbkit.tfdata.offload_requests.handle`) and never hangs.

It reports the elements it has received a few times a second; when they stop (a lost worker:
TF 2.21 waits at the end of a DYNAMIC epoch for the dead worker's task), the parent kills it
and raises :class:`~plumbkit.service.errors.ServiceStall` naming the lost worker (for workers
plumbkit started) and the elements received. :class:`InProcessClient` speaks the same protocol
in this process, for pipelines whose Python functions only live here. Requests and answers
are length-prefixed pickles on two pipes of the client's own.
"""

from __future__ import annotations

import gc
import os
import pickle
import select
import shutil
import struct
import subprocess
import tempfile
import threading
import time
import traceback
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ..model.errors import PipelineError
from .errors import LostWorker, ServiceError, ServiceStall
from .processes import STARTUP_SECONDS, can_pin, describe_exit, launch, log_tail, package_parent
from ..model.errors import first_line

if TYPE_CHECKING:  # the cluster module starts this one's client: a type only here
    from .cluster import ServiceCluster


def _send(fd: int, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(struct.pack("!Q", len(data)) + data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _read_exactly(fd: int, size: int) -> bytes:
    parts, left = [], size
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise EOFError("the other end closed the pipe")
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def _recv(fd: int, timeout: float | None) -> Any:
    """The next frame, or None if none started within ``timeout`` s (a started frame is read whole)."""
    if timeout is not None:
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            return None
    (size,) = struct.unpack("!Q", _read_exactly(fd, 8))
    return pickle.loads(_read_exactly(fd, size))


@dataclass
class Watch:
    """How long to wait for elements before calling a run stalled."""

    first_within: float = 90.0  # the first element (TF start, registration, workers' warm-up)
    stall_after: float | None = 10.0  # no new element for this long, once elements flow
    deadline: float | None = None  # the whole request (for requests that report no progress)
    expected: int | None = None  # elements one pass should give (for the message)
    sharding: str | None = None


def stall_error(elements: int, waited: float, lost: list[LostWorker], watch: Watch,
                started_workers: bool) -> ServiceStall:
    """The :class:`ServiceStall` for a run that got ``elements`` and then nothing for ``waited`` s."""
    if lost:
        who = "; ".join(str(w) for w in lost)
        why = f"lost {who}"
    elif started_workers:
        why = "no worker plumbkit started has died"
    else:
        why = "a worker may have been lost (plumbkit did not start these workers, so it cannot tell which)"
    of = f" of {watch.expected:,}" if watch.expected else ""
    message = (f"the tf.data service stalled: no element for {waited:.0f} s after {elements:,}{of} "
               f"arrived; {why}.")
    if lost and watch.sharding == "DYNAMIC":
        message += (" With DYNAMIC sharding the client then waits at the end of the epoch for the lost "
                    "worker's task (TF 2.21 does not hand it to another worker): at most once, not "
                    "exactly once, for this epoch.")
    message += " plumbkit stopped its measuring client instead of waiting."
    return ServiceStall(message, elements=elements, lost=tuple(lost), expected=watch.expected, waited=waited)


class MeasuringClient:
    """A client process pinned to ``cores`` that runs plumbkit's measurements, and never hangs.

    It starts on first use and is restarted after a stall. ``cluster`` (if plumbkit started the
    service) lets a stall name the lost worker.
    """

    def __init__(self, cores: Sequence[int] | None = None, *, cluster: ServiceCluster | None = None,
                 startup_timeout: float = STARTUP_SECONDS):
        self.cores = list(cores) if cores is not None else None
        self.cluster, self.startup_timeout = cluster, startup_timeout
        self._popen: subprocess.Popen | None = None
        self._dir = tempfile.mkdtemp(prefix="plumbkit-client-")
        self._log = Path(self._dir) / "client.log"
        self._to = self._from = -1
        self._ready = False  # the running process said it is ready
        # [process, request fd, response fd], shared with the finalizer; emptied once closed, so
        # a descriptor number is never closed twice (it may belong to another file by then).
        self._state: list = [None, -1, -1]
        self._finalizer = weakref.finalize(self, _close_client, self._state, self._dir)

    @property
    def pid(self) -> int | None:
        return self._popen.pid if self._popen is not None else None

    def start_in_background(self) -> None:
        """Start the client's process without waiting for it: its TensorFlow loads (~9 s pinned to
        one core on CI's machine) while the caller does other work; the first call waits for it."""
        if self._popen is not None and self._popen.poll() is None:
            return
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        args = {"main": "client", "cores": self.cores if can_pin() else None, "requests": req_r,
                "responses": resp_w, "package_parent": package_parent()}
        self._popen = launch(args, self._log, pass_fds=(req_r, resp_w), stdout=subprocess.DEVNULL)
        os.close(req_r)
        os.close(resp_w)
        self._to, self._from = req_w, resp_r
        self._state[:] = [self._popen, req_w, resp_r]
        self._ready = False

    def _start(self) -> None:
        """Launch the process if it is not running, and wait until it says it is ready."""
        self.start_in_background()
        if self._ready:
            return
        hello = self._wait_frame(self.startup_timeout)
        if not (isinstance(hello, dict) and hello.get("ready")):
            raise ServiceError(f"the measuring client did not start: {hello}")
        self.cores = hello.get("cores") or self.cores
        self._ready = True

    def _wait_frame(self, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                frame = _recv(self._from, 0.25)
            except EOFError:
                frame = None
            if frame is not None:
                return frame
            if self._popen.poll() is not None:
                break
        code = self._popen.poll()
        self.close()
        raise ServiceError(f"the measuring client {describe_exit(code) if code is not None else 'did not answer'}: "
                           f"{log_tail(self._log) or 'no output'}")

    def call(self, request: dict[str, Any], watch: Watch | None = None,
             on_progress: Callable[[int], None] | None = None) -> Any:
        """Send ``request`` to the client; return its answer, or raise PipelineError (the
        pipeline failed) or ServiceStall (elements stopped coming)."""
        watch = watch or Watch()
        self._start()
        _send(self._to, request)
        start = last_change = time.monotonic()
        elements = 0
        while True:
            try:
                frame = _recv(self._from, 0.25)
            except EOFError:  # the client closed its end: it is exiting
                frame = None
                try:
                    self._popen.wait(5)
                except subprocess.TimeoutExpired:
                    self._popen.kill()
                    self._popen.wait(5)
            now = time.monotonic()
            if isinstance(frame, dict) and "progress" in frame:
                if frame["progress"] != elements:
                    elements, last_change = frame["progress"], now
                    if on_progress is not None:
                        on_progress(elements)
            elif isinstance(frame, dict) and "ok" in frame:
                return frame["ok"]
            elif isinstance(frame, dict) and "error" in frame:
                raise PipelineError(frame["error"])
            if self._popen.poll() is not None:
                code = self._popen.poll()
                self.close()
                raise ServiceError(f"the measuring client {describe_exit(code)}: "
                                   f"{log_tail(self._log) or 'no output'}")
            stalled = ((elements == 0 and now - start > watch.first_within)
                       or (elements > 0 and watch.stall_after and now - last_change > watch.stall_after)
                       or (watch.deadline is not None and now - start > watch.deadline))
            if stalled:
                self.close()
                lost = self.cluster.lost_workers() if self.cluster is not None else []
                raise stall_error(elements, now - last_change, lost, watch, self.cluster is not None)

    def close(self) -> None:
        """Stop the client process (the next call starts a fresh one)."""
        if self._popen is not None:
            _close_client(self._state, None)
            self._popen, self._to, self._from, self._ready = None, -1, -1, False

    def __enter__(self) -> "MeasuringClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
        shutil.rmtree(self._dir, ignore_errors=True)


def shared_client(cluster: ServiceCluster) -> MeasuringClient:
    """The cluster's own measuring client, pinned to the cores it keeps for the client: started
    once, reused by every measurement through it, stopped with the cluster."""
    client = getattr(cluster, "_measuring_client", None)
    if client is None:
        client = MeasuringClient(cluster.client_cores, cluster=cluster)
        cluster._measuring_client = client  # noqa: SLF001
        cluster.on_stop(lambda: client.__exit__())
    return client


def _close_client(state: list, directory: str | None) -> None:
    """Kill the client process and close its pipes (``state`` is emptied: done once)."""
    popen, *fds = state
    state[:] = [None, -1, -1]
    if popen is not None and popen.poll() is None:
        popen.kill()
        try:
            popen.wait(10)
        except subprocess.TimeoutExpired:
            pass
    for fd in fds:
        if isinstance(fd, int) and fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass
    if directory:
        shutil.rmtree(directory, ignore_errors=True)


class InProcessClient:
    """The measuring client's protocol in this process (for pipelines whose Python functions
    exist only here). A stalled run is abandoned on its daemon thread (it stays blocked inside
    TensorFlow until the process exits) and reported as :class:`ServiceStall`."""

    def __init__(self, *, cluster: ServiceCluster | None = None):
        self.cluster = cluster
        self.cores = None
        self.pid = os.getpid()

    def call(self, request: dict[str, Any], watch: Watch | None = None,
             on_progress: Callable[[int], None] | None = None) -> Any:
        from ..tfdata.offload_requests import Counter, handle
        watch = watch or Watch()
        counter, box = Counter(), {}

        def run() -> None:
            try:
                box["ok"] = handle(request, counter)
            except BaseException as err:  # noqa: BLE001 - reported to the caller
                box["error"] = err
        thread = threading.Thread(target=run, daemon=True, name="plumbkit-service-client")
        thread.start()
        start = last_change = time.monotonic()
        elements = 0
        while thread.is_alive():
            thread.join(0.25)
            now = time.monotonic()
            if counter.n != elements:
                elements, last_change = counter.n, now
                if on_progress is not None:
                    on_progress(elements)
            if ((elements == 0 and now - start > watch.first_within)
                    or (elements > 0 and watch.stall_after and now - last_change > watch.stall_after)
                    or (watch.deadline is not None and now - start > watch.deadline)):
                lost = self.cluster.lost_workers() if self.cluster is not None else []
                raise stall_error(elements, now - last_change, lost, watch, self.cluster is not None)
        gc.collect()  # the request's iterators end now (see client_main)
        if "error" in box:
            err = box["error"]
            raise PipelineError(f"{type(err).__name__}: {err}") from err
        return box.get("ok")

    def close(self) -> None:
        pass


def client_main(args: dict[str, Any]) -> None:
    """The measuring client process: answer requests until the pipe closes."""
    os.dup2(2, 1)  # anything printed goes to the log, never into the protocol
    requests, responses = args["requests"], args["responses"]
    lock = threading.Lock()

    def send(obj: Any) -> None:
        with lock:
            _send(responses, obj)

    parent = os.getppid()

    def orphaned() -> None:  # a measurement blocked inside TensorFlow must not outlive plumbkit
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)
    threading.Thread(target=orphaned, daemon=True).start()

    import tensorflow as tf  # noqa: F401 - imported after pinning, so pools fit the cores
    from ..tfdata.offload_requests import Counter, handle
    cores = sorted(os.sched_getaffinity(0)) if can_pin() else None
    send({"ready": True, "pid": os.getpid(), "cores": cores})
    while True:
        try:
            request = _recv(requests, None)
        except EOFError:
            os._exit(0)
        counter, done = Counter(), threading.Event()

        def report() -> None:
            while not done.wait(0.25):
                send({"progress": counter.n})
        reporter = threading.Thread(target=report, daemon=True)
        reporter.start()
        try:
            answer = {"ok": handle(request, counter)}
        except Exception as err:  # noqa: BLE001 - the parent reports it
            answer = {"error": f"{type(err).__name__}: {first_line(str(err))}",
                      "trace": traceback.format_exc()}
        # The request's iterators (held in cycles by tf.functions) stop their threads and
        # release their service jobs now, not whenever the collector next runs.
        gc.collect()
        done.set()
        reporter.join()
        send({"progress": counter.n})
        send(answer)


__all__ = ["InProcessClient", "MeasuringClient", "Watch", "client_main", "shared_client", "stall_error"]
