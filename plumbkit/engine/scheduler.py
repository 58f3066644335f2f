"""One measurement at a time, and every one can be stopped.

Two measurements that overlap on the same cores measure each other. Every public engine
operation (``trace``, ``step``, ``walk``, ``optimize``, ``pick_best``) is an :class:`Operation`
granted the process's one measuring slot by the :data:`SCHEDULER` for as long as it runs:

- A live trace is *preemptible*: when anything else asks for the slot, the live trace is
  stopped (it keeps what it measured) and the newcomer is told so through its progress.
- Anything else *queues*: a second optimization waits for the first, in arrival order, and
  says what it waits for. Front ends read :meth:`Scheduler.state` (or :meth:`Scheduler.watch`
  it) to disable buttons that would start a second measurement.

Every operation can be stopped: :meth:`Operation.cancel` (a Cancel button, from any thread) or
Ctrl-C in the thread that runs it. The running measurement registers how to stop itself
(:meth:`Operation.stopping`: the tracer's ``stop`` ends even a ``GetNext`` blocked inside
TensorFlow) and code between measurements calls :func:`checkpoint`. The operation then ends
cleanly and returns what was measured so far, marked partial (``result.partial``), the same way
for every operation: the :func:`operation` decorator does that in one place.

The running operation travels in a context variable, so nested calls (an optimization's own
traces) join it instead of asking for the slot again, and code far below needs no new
arguments to honour a Cancel. While an operation runs, other libraries' chatter is silenced
(:func:`plumbkit.host.quiet.quiet`; ``verbose=True`` keeps it).
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import signal
import threading
import time
import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, TypeVar

from ..host.quiet import quiet

F = TypeVar("F", bound=Callable[..., Any])
#: ``on_progress(message, fraction done)`` for long operations.
Progress = Callable[[str, float], None]

#: How the reason an operation ended shows in results: these two mean "cut short, partial".
CANCELLED, INTERRUPTED = "cancelled", "interrupted"


class Cancelled(Exception):
    """The operation was asked to stop (Cancel, Ctrl-C, or preempted).

    ``partial`` carries what the measurement that was running had measured (e.g. a Trace).
    """

    def __init__(self, reason: str = CANCELLED, partial: Any = None):
        super().__init__(reason)
        self.reason = reason
        self.partial = partial


@dataclass(frozen=True)
class Measured:
    """One measurement an operation made: the phase it belonged to and its result (a Trace)."""

    phase: str
    result: Any
    complete: bool


@dataclass(frozen=True)
class State:
    """What the scheduler is doing, for front ends (buttons, status lines)."""

    active: str | None  # the running operation's name
    preemptible: bool  # True: starting something else stops it (a live trace)
    phase: str  # what the running operation is doing
    waiting: int  # operations queued behind it

    @property
    def busy(self) -> bool:
        """A measurement that another one would have to wait for is running."""
        return self.active is not None and not self.preemptible


class Operation:
    """One engine operation: its name, progress, measurements, and how to stop it."""

    def __init__(self, name: str, *, preemptible: bool = False, on_progress: Progress | None = None):
        self.name = name
        self.preemptible = preemptible
        self.phase = "waiting to start"
        self.fraction = 0.0
        self.reason: str | None = None  # why it was stopped
        self.measurements: list[Measured] = []
        self.messages: list[str] = []  # what the scheduler told it (e.g. the live trace was stopped)
        self.kept: Any = None  # the result being built, for a partial return (see keep())
        self.stop_event = threading.Event()
        self.thread = threading.current_thread()
        self._on_progress = on_progress
        self._stoppers: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    # -- stopping ----------------------------------------------------------------------------
    def cancel(self, reason: str = CANCELLED) -> None:
        """Stop this operation (safe from any thread): its measurement ends at once."""
        with self._lock:
            if self.reason is None:
                self.reason = reason
            self.stop_event.set()
            stoppers = list(self._stoppers)
        for stop in stoppers:
            stop()

    @property
    def cancelled(self) -> bool:
        return self.stop_event.is_set()

    @property
    def partial(self) -> bool:
        """Cut short by Cancel or Ctrl-C (a preempted live trace is merely stopped)."""
        return self.reason in (CANCELLED, INTERRUPTED)

    def check(self) -> None:
        """Raise :class:`Cancelled` if this operation was asked to stop."""
        if self.cancelled:
            raise Cancelled(self.reason or CANCELLED)

    @contextmanager
    def stopping(self, stop: Callable[[], None]) -> Iterator[None]:
        """While the block runs, cancelling this operation calls ``stop`` (e.g. ``tracer.stop``)."""
        with self._lock:
            self._stoppers.append(stop)
            already = self.cancelled
        if already:
            stop()
        try:
            yield
        finally:
            with self._lock:
                self._stoppers.remove(stop)

    # -- reporting ---------------------------------------------------------------------------
    def progress(self, message: str, fraction: float | None = None) -> None:
        """Record and forward progress (the caller's ``on_progress`` and the scheduler's watchers)."""
        self.phase = message
        if fraction is not None:
            self.fraction = fraction
        if self._on_progress is not None:
            self._on_progress(message, self.fraction)
        SCHEDULER._changed()  # noqa: SLF001 - watchers show the running phase

    def tell(self, message: str) -> None:
        """A message from the scheduler for whoever watches this operation."""
        self.messages.append(message)
        if self._on_progress is not None:
            self._on_progress(message, self.fraction)

    def record(self, result: Any, *, complete: bool = True) -> None:
        """Keep a measurement (so a cancelled operation can return what it measured)."""
        self.measurements.append(Measured(self.phase, result, complete))

    def keep(self, result: Any) -> None:
        """The result this operation is building (a Walk growing step by step): if it is cut
        short, its partial builder can return this, marked partial."""
        self.kept = result

    def describe(self) -> str:
        return f"{self.name} ({self.phase})" if self.phase else self.name

    def __repr__(self) -> str:
        return f"<Operation {self.describe()}{' stopping' if self.cancelled else ''}>"


class Scheduler:
    """Grants the process's one measuring slot to one :class:`Operation` at a time."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.active: Operation | None = None
        self._queue: list[Operation] = []
        self._watchers: list[Callable[[], Callable[[State], None] | None]] = []
        self._watch_lock = threading.Lock()

    def state(self) -> State:
        op = self.active
        return State(active=op.name if op else None, preemptible=bool(op and op.preemptible),
                     phase=op.phase if op else "", waiting=len(self._queue))

    def watch(self, callback: Callable[[State], None]) -> None:
        """Call ``callback(state)`` on every change (held weakly when it is a bound method)."""
        ref = weakref.WeakMethod(callback) if inspect.ismethod(callback) else (lambda: callback)
        with self._watch_lock:
            self._watchers.append(ref)

    def _changed(self) -> None:
        state = self.state()
        with self._watch_lock:
            pairs = [(ref, ref()) for ref in self._watchers]
            self._watchers = [ref for ref, callback in pairs if callback is not None]
        for _, callback in pairs:
            if callback is None:
                continue
            try:
                callback(state)
            except Exception:  # noqa: BLE001 - a broken display must never stop a measurement
                pass

    def acquire(self, op: Operation, *, poll: float = 0.05) -> None:
        """Wait for the slot (stopping a live trace that holds it); raises Cancelled if ``op`` is
        cancelled while it waits. Ctrl-C while waiting propagates as KeyboardInterrupt."""
        told: list[Operation] = []
        with self._cond:
            for other in self._queue:
                if other.preemptible:  # a live trace still waiting would be stopped at once anyway
                    other.cancel("superseded")
            self._queue.append(op)
        self._changed()
        try:
            while True:
                with self._cond:
                    if op.cancelled:
                        raise Cancelled(op.reason or CANCELLED)
                    active = self.active
                    if active is None and self._queue[0] is op:
                        self.active = op
                        self._queue.remove(op)
                        op.phase = op.name
                        break
                    if active is None or any(a is active for a in told):
                        self._cond.wait(poll)
                        continue
                    told.append(active)
                # outside the lock: stopping a tracer and telling a widget take their own locks
                if active.preemptible:
                    active.cancel(f"stopped: {op.name} started")
                    op.tell(f"stopped the {active.name} to run {op.name} (it keeps what it measured)")
                else:
                    op.tell(f"waiting for {active.describe()} to finish")
        finally:
            with self._cond:
                if op in self._queue:
                    self._queue.remove(op)
                self._cond.notify_all()
        self._changed()

    def release(self, op: Operation) -> None:
        with self._cond:
            if self.active is op:
                self.active = None
            self._cond.notify_all()
        self._changed()

    def cancel_active(self, reason: str = CANCELLED) -> Operation | None:
        """Cancel whatever runs now (``%plumb cancel``); returns it."""
        op = self.active
        if op is not None:
            op.cancel(reason)
        return op

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until nothing runs or waits (tests, scripts)."""
        end = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self.active is not None or self._queue:
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(0.05 if left is None else min(0.05, left))
        return True


#: The process's scheduler: every plumbkit measurement in this process goes through it.
SCHEDULER = Scheduler()
_current: contextvars.ContextVar[Operation | None] = contextvars.ContextVar("plumbkit_operation",
                                                                           default=None)


def current() -> Operation | None:
    """The operation running in this thread's context (None outside any operation)."""
    return _current.get()


def checkpoint() -> None:
    """Between two steps of a long action: raise :class:`Cancelled` if the operation was stopped."""
    op = current()
    if op is not None:
        op.check()


def keep(result: Any) -> None:
    """Publish the result being built to the running operation (see :meth:`Operation.keep`)."""
    op = current()
    if op is not None:
        op.keep(result)


def stop_event() -> threading.Event | None:
    """The running operation's stop event, for loops below the engine that take one."""
    op = current()
    return op.stop_event if op is not None else None


class Handle:
    """Stop an operation that another thread starts (a widget's Cancel button).

    The thread that runs the operation calls it inside ``with handle.bound():``; the operation
    attaches itself to the handle when it starts, and :meth:`cancel` (from any thread, even
    before the operation has started or while it waits for the slot) stops it. A handle made
    with ``preemptible=True`` makes the operation a live view that the next one stops.
    """

    def __init__(self, *, preemptible: bool = False):
        self.preemptible = preemptible
        self.op: Operation | None = None
        self._reason: str | None = None
        self._lock = threading.Lock()

    @contextmanager
    def bound(self) -> Iterator["Handle"]:
        with self._lock:
            self.op, self._reason = None, None
        token = _handle.set(self)
        try:
            yield self
        finally:
            _handle.reset(token)

    def attach(self, op: Operation) -> None:
        with self._lock:
            self.op = op
            reason = self._reason
        if reason is not None:
            op.cancel(reason)

    def cancel(self, reason: str = CANCELLED) -> None:
        with self._lock:
            self._reason = reason
            op = self.op
        if op is not None:
            op.cancel(reason)

    @property
    def active(self) -> bool:
        """Its operation holds the measuring slot now."""
        return self.op is not None and SCHEDULER.active is self.op


_handle: contextvars.ContextVar[Handle | None] = contextvars.ContextVar("plumbkit_handle", default=None)


@contextmanager
def _ctrl_c_cancels(op: Operation) -> Iterator[None]:
    """In the main thread, Ctrl-C also cancels ``op`` before the usual KeyboardInterrupt.

    Python drops a KeyboardInterrupt that lands inside a garbage-collector callback ("Exception
    ignored in ..."), and a thread blocked in TensorFlow never sees one; the cancel flag set here
    ends the operation at its next checkpoint either way. The previous handler runs after it and
    comes back when the block ends; where there is no Python-level handler nothing is changed.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if not callable(previous):
        yield
        return

    def handler(signum, frame):  # noqa: ANN001 - the signal module's signature
        op.cancel(INTERRUPTED)
        previous(signum, frame)

    signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


#: ``partial(op, error, arguments)`` builds what a cut-short operation returns (None: re-raise).
PartialBuilder = Callable[[Operation, Cancelled, inspect.BoundArguments], Any]


def operation(name: str, *, preemptible: bool = False, partial: PartialBuilder | None = None) -> Callable[[F], F]:
    """Make ``fn`` a scheduled operation: one at a time, stoppable, quiet, partial when cut short.

    Called inside another operation (an optimization's own traces), ``fn`` just runs as part of
    it. Called at the top, it waits for the measuring slot, runs with the current operation set
    and other libraries silenced (the wrapper takes ``verbose=True`` to keep them), forwards
    ``on_progress``, and when cancelled or interrupted returns ``partial(...)``: what was
    measured so far, marked partial. Without a ``partial`` builder, or when it has nothing,
    the Cancelled (or KeyboardInterrupt) propagates.
    """
    def decorate(fn: F) -> F:
        signature = inspect.signature(fn)
        takes_progress = "on_progress" in signature.parameters

        @functools.wraps(fn)
        def run(*args: Any, verbose: bool = False, **kwargs: Any) -> Any:
            if current() is not None:
                return fn(*args, **kwargs)
            bound = signature.bind(*args, **kwargs)
            handle = _handle.get()
            op = Operation(name, preemptible=preemptible or bool(handle and handle.preemptible),
                           on_progress=kwargs.get("on_progress"))
            if handle is not None:
                handle.attach(op)
            if takes_progress:
                kwargs["on_progress"] = op.progress
            token = _current.set(op)
            try:
                try:
                    SCHEDULER.acquire(op)
                    from ..tfdata.held_constants import holding  # TensorFlow: loaded with the first operation
                    try:
                        with quiet(verbose), _ctrl_c_cancels(op), holding():  # in-memory data held once
                            return fn(*args, **kwargs)
                    finally:
                        SCHEDULER.release(op)
                except KeyboardInterrupt:
                    op.cancel(INTERRUPTED)
                    error = Cancelled(INTERRUPTED)
                    result = partial(op, error, bound) if partial else None
                    if result is None:
                        raise
                    return result
                except Cancelled as error:
                    op.cancel(error.reason)
                    error.reason = op.reason or error.reason
                    result = partial(op, error, bound) if partial else None
                    if result is None:
                        raise
                    return result
            finally:
                _current.reset(token)

        params = list(signature.parameters.values())
        extra = inspect.Parameter("verbose", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=bool)
        if params and params[-1].kind == inspect.Parameter.VAR_KEYWORD:
            params.insert(len(params) - 1, extra)
        else:
            params.append(extra)
        run.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
        run.operation_name = name  # type: ignore[attr-defined]
        return run  # type: ignore[return-value]
    return decorate


__all__ = ["CANCELLED", "INTERRUPTED", "Cancelled", "Handle", "Measured", "Operation", "Progress", "SCHEDULER",
           "Scheduler", "State", "checkpoint", "current", "keep", "operation", "stop_event"]
