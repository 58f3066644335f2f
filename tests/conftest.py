"""Shared test set-up: quiet TensorFlow, and ground truth measured in the same process."""

import dataclasses
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# plumbkit's disk tier and its probe default to $XDG_CACHE_HOME/plumbkit: the suite writes under a
# folder of its own, never the user's ~/.cache (removed at exit)
import atexit  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402

_CACHE_HOME = tempfile.mkdtemp(prefix="plumbkit-tests-cache-")
os.environ["XDG_CACHE_HOME"] = _CACHE_HOME
_EXIT: dict = {}


def _exit_took() -> None:
    """Registered first, so it runs after every other exit handler (threads joined, the cache
    folder removed): says how long they took and when they ended (tests/run prints when the
    process ended: the time between is TensorFlow's own teardown)."""
    if "summary" not in _EXIT:
        return
    import faulthandler
    faulthandler.cancel_dump_traceback_later()
    print(f"== exit: Python's exit handlers done {time.monotonic() - _EXIT['summary']:.1f} s after the "
          f"summary, at {time.strftime('%H:%M:%S')}", file=sys.__stderr__, flush=True)


atexit.register(_exit_took)
atexit.register(shutil.rmtree, _CACHE_HOME, ignore_errors=True)

import signal  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from typing import Callable  # noqa: E402

import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

from plumbkit.bench.examples import planted_work  # noqa: E402
from plumbkit.engine.compare import PROTOCOLS  # noqa: E402
from plumbkit.service.processes import usable_cores  # noqa: E402
from plumbkit.tfdata.options import sequential_options  # noqa: E402

tf.get_logger().setLevel("ERROR")
tf.autograph.set_verbosity(0)

#: Only for tests that measure the truth and the estimate at different moments (a trace, then
#: the truth timed seconds later), each saying so in its docstring: a shared machine's speed
#: drifts between the two (the same Python tokenizer ran 14 and 28 minibatches/s a minute apart),
#: so such a test gets one more attempt, fresh, before it fails. A rerun hides half the failures
#: of a test that fails one run in two: figures that can be measured alike (interleaved, medians)
#: are, and get none. Every rerun is named in the log (:func:`pytest_terminal_summary`).
measured_against_the_clock = pytest.mark.flaky(reruns=1)

@pytest.fixture
def ctrl_c_raises():
    """SIGINT raises KeyboardInterrupt for the test's duration, however pytest was started.

    A background job of a non-interactive shell (``nohup``, many CI runners) starts with SIGINT
    ignored, and Python then installs no handler: the Ctrl-C a test sends
    (``_thread.interrupt_main``) is dropped and the operation runs to its end (one test waited
    280 s so). The previous disposition comes back after the test."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


#: The measuring client's core when there are two: the client alone on core 0, the workers on the
#: other (None on one core: nothing to pin apart).
SERVICE_CLIENT_CORES = usable_cores()[:1] if len(usable_cores()) > 1 else None


@pytest.fixture(scope="module")
def cluster(request):
    """A tf.data service of one worker for the module's tests: a dispatcher and a worker, each a
    process of its own on loopback, stopped by a finalizer even when a test fails."""
    from plumbkit.service.cluster import ServiceCluster
    c = ServiceCluster(1, client_cores=SERVICE_CLIENT_CORES, worker_timeout_ms=1000)
    request.addfinalizer(c.stop)  # a no-op where a test stopped it (test_offload_measured)
    return c.start()


def python_module_with_ctrl_c(module: str, *args: str) -> list[str]:
    """The command line of ``python -m module args`` whose SIGINT raises KeyboardInterrupt, as
    in a terminal: a child inherits an ignored SIGINT from a background job (see
    :func:`ctrl_c_raises`), and then the SIGINT a test sends it does nothing."""
    code = ("import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
            f"sys.argv = [{module!r}, *sys.argv[1:]]; "
            f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)")
    return [sys.executable, "-c", code, *args]


#: Notebooks whose cells check what comes out, never a speed (tests/run: three at a time). 06 too
#: since it prints its offload decision instead of asserting it (session 46); what it asserts is
#: the cheap pipeline not offloaded (1.8 MB sent a minibatch) and a Python cut refused: ~60 s
#: of the measuring phase. 02 stays alone: its walks show parallelism paying, and beside another
#: test a step read 228, 223, 236, 146/s (one core left).
CONCURRENT_NOTEBOOKS = {"01-quickstart.ipynb", "03-optimize.ipynb", "04-caching-and-randomness.ipynb",
                        "05-python-api.ipynb", "06-offload.ipynb", "07-model-in-the-loop.ipynb"}


#: Phase 1's longest files (54-103 s of test time each, three at a time, one run of session 51),
#: handed to the workers first (``tests/run`` turns xdist's own order off: most tests first, it
#: handed out the property, browser and notebook files, few tests but long, last, and the phase
#: ended on one worker running them while the others sat idle).
LONGEST_FIRST = ("test_notebook.py", "test_real_pipelines.py", "test_rebuild_property.py", "06-offload.ipynb",
                 "07-model-in-the-loop.ipynb", "04-caching-and-randomness.ipynb", "test_browser.py",
                 "test_service.py", "test_cli.py", "test_optimize.py", "test_disk_plan.py", "test_bench.py")


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by marker
def pytest_collection_modifyitems(config, items):  # noqa: ANN001 - pytest's hook
    """Mark the notebooks' cells that may run beside another test (a test file says so itself);
    under pytest-xdist, put the longest files first (:data:`LONGEST_FIRST`), each file's tests in
    their order."""
    for item in items:
        if item.path.suffix == ".ipynb" and item.path.name in CONCURRENT_NOTEBOOKS:
            item.add_marker(pytest.mark.concurrent)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
        items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest as collected


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # noqa: ANN001 - pytest's hook
    """Name every test that was rerun, and why its first attempt failed, in the CI log: ``-ra``
    counts reruns in the last line ("1 rerun") but names none (only ``-rR`` does)."""
    reruns = terminalreporter.stats.get("rerun", [])
    if not reruns or "R" in getattr(terminalreporter, "reportchars", ""):
        return
    terminalreporter.write_sep("=", f"{len(reruns)} rerun(s): the first attempt failed")
    for report in reruns:
        lines = [line for line in str(report.longrepr or "").splitlines() if line.startswith("E ")]
        terminalreporter.write_line(f"RERUN {report.nodeid}" + (f" - {lines[0][1:].strip()[:160]}" if lines else ""))


#: Seconds after the summary before a slow exit dumps every Python thread's stack (and again
#: each time they pass again). In two CI runs of three, phase 2 spent ~58 s between its summary
#: and its exit, with no test running; this names what it waits on, in the log.
EXIT_DUMP_SECONDS = 20


def pytest_sessionstart(session):  # noqa: ANN001 - pytest's hook
    _EXIT["session"] = session


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):  # noqa: ANN001 - pytest's hook
    """From here the process only exits: time it (:func:`_exit_took`), and dump the threads if it
    hangs.

    Then it ends with the session's status, without the garbage collection pytest runs after
    this hook (five ``gc.collect()`` in its unraisable-exception plugin) and Python's own at
    finalization. Collecting what the measuring tests left took 58-59 s in 3 of 6 fresh-clone CIs
    (the thread dump: ``gc_collect_harder``; a TensorFlow ``Executor.__del__`` waits for its
    pending nodes), and checks nothing: an exception in a finalizer during a test is still
    reported with that test. What is collected, and why it waits, is not known yet:
    ``PLUMBKIT_TESTS_FULL_EXIT=1`` exits the usual way to look."""
    if hasattr(config, "workerinput"):  # an xdist worker: its controller's exit is the one timed
        return
    import faulthandler
    faulthandler.dump_traceback_later(EXIT_DUMP_SECONDS, repeat=True, file=sys.__stderr__)
    _EXIT["summary"] = time.monotonic()
    session = _EXIT.get("session")
    if session is None or os.environ.get("PLUMBKIT_TESTS_FULL_EXIT"):
        return
    status = int(session.exitstatus)
    print("== exit: the final garbage collection skipped (PLUMBKIT_TESTS_FULL_EXIT=1 runs it)",
          file=sys.__stderr__, flush=True)
    atexit._run_exitfuncs()  # the cache folder removed, the exit timed
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


#: For tests that check what a plan yields, not its speed: the comparison only decides what
#: comes back, so two short rounds do.
BRIEF = dataclasses.replace(PROTOCOLS["brief"], rounds=2)


#: CPU seconds the difference of a truth's long and short runs aims at: at 400 elements a
#: 110 µs map's difference was 33 ms and its truth read 94-161 µs over eight calls in a row;
#: at 1,600 elements, 105-115 µs.
TRUTH_CPU_SECONDS = 0.12


def cpu_seconds_per_element(fn, options=None, *, n: int | None = None, rounds: int = 5,
                            parallel_calls: int | None = None, batched: int | None = None) -> float:
    """CPU seconds ``fn`` costs per element: one reading of :func:`cpu_meter` (see there)."""
    return cpu_meter(fn, options, n=n, rounds=rounds, parallel_calls=parallel_calls, batched=batched)()


def cpu_meter(fn, options=None, *, n: int | None = None, rounds: int = 5,
              parallel_calls: int | None = None, batched: int | None = None) -> Callable[[], float]:
    """A reading, on each call, of the CPU seconds ``fn`` costs per element, alone over a cheap source (``range``) in the
    execution mode ``options`` and ``parallel_calls`` set (None: TensorFlow's defaults), timed by the process CPU
    clock, the output driven by ``reduce`` (no Python per element), minus the same source
    without ``fn``; ``n`` elements minus ``n / 4`` (so each run's start-up — threads, function
    instantiation — cancels); runs interleaved, medians. ``n`` (None: sized so the difference
    costs about TRUTH_CPU_SECONDS, at least 400 elements). Independent of plumbkit's own code:
    the truth the estimates are checked against.

    ``batched``: ``fn`` as tf.data runs it under a ``batch(batched)`` (fused with it, MapAndBatch),
    less the same batch over a map that only casts (``fn`` maps to a float scalar). Planted
    ``heavy`` under defaults: alone 322-406 µs per element, fused 298-339; the whole planted
    pipeline 398-427 against 440-510 for the sum of the maps alone, parse alone + heavy fused
    400-443.

    Built once (its runs traced and warm, ``n`` sized), read on each call: a test that takes the
    truth around every trace pays the building once (about half of each reading's wall time).
    """
    def runner(with_fn: bool, count: int):
        ds = tf.data.Dataset.range(count)
        if with_fn:
            ds = ds.map(fn, num_parallel_calls=parallel_calls)
        elif batched:
            ds = ds.map(lambda x: tf.cast(x, tf.float32), num_parallel_calls=parallel_calls)
        if batched:
            ds = ds.batch(batched)
        if options is not None:
            ds = ds.with_options(options)
        run = tf.function(lambda: ds.reduce(tf.constant(0, tf.int64), lambda c, _: c + 1))
        run()  # traced once, warm
        return run

    if n is None:
        pilot = runner(True, 200)
        c0 = time.process_time()
        pilot()
        per_element = max(1e-7, (time.process_time() - c0) / 200)
        n = int(min(4000, max(400, TRUTH_CPU_SECONDS / (0.75 * per_element))))
    small = n // 4
    runs = {(f, k): runner(f, k) for f in (True, False) for k in (n, small)}

    def reading() -> float:
        times: dict[tuple, list[float]] = {key: [] for key in runs}
        for r in range(rounds):
            for key in (list(runs) if r % 2 == 0 else list(runs)[::-1]):
                c0 = time.process_time()
                runs[key]()
                times[key].append(time.process_time() - c0)
        med = {key: statistics.median(v) for key, v in times.items()}
        with_fn = med[(True, n)] - med[(True, small)]
        without = med[(False, n)] - med[(False, small)]
        return max(1e-9, (with_fn - without) / (n - small))
    return reading


def interleaved_throughput(factories: dict, *, rounds: int = 3, seconds: float = 1.5) -> dict[str, float]:
    """Untraced minibatches/s of each pipeline (``factories``: name -> zero-argument callable),
    measured in alternating order, medians: a drift of the machine's speed reaches every
    pipeline alike, where figures measured one after the other a few seconds apart differ by it."""
    from plumbkit.tfdata.run import untraced_throughput
    samples: dict[str, list[float]] = {k: [] for k in factories}
    for r in range(rounds):
        for key in (list(factories) if r % 2 == 0 else list(factories)[::-1]):
            samples[key].append(untraced_throughput(factories[key](), seconds, 0.3))
    return {k: statistics.median(v) for k, v in samples.items()}


def with_neighbour_cores(fn):
    """``(fn(), cores other processes kept busy while it ran)`` (None where ``/proc/stat`` is not
    readable): a figure that needs this machine's cores is checked only where they were ours."""
    from plumbkit.host.machine import machine_busy_seconds
    busy, own, began = machine_busy_seconds(), time.process_time(), time.monotonic()
    result = fn()
    busy_after = machine_busy_seconds()
    if busy is None or busy_after is None:
        return result, None
    others = (busy_after - busy) - (time.process_time() - own)
    return result, max(0.0, others / (time.monotonic() - began))


def isolated_seconds_per_element(fn, *, n: int | None = None, dtype=tf.int64) -> float:
    """Seconds ``fn`` costs per element alone, run as written and sequentially with intra-op
    pinned to one thread (the pinned tests' execution mode), in process CPU time (on a busy
    machine wall time would count waiting for a core)."""
    return cpu_seconds_per_element(fn, sequential_options(), n=n)


def heavy(x):
    """Planted operator: 96 matmul units (~0.3-0.4 ms)."""
    return planted_work(x, 96)


def medium(x):
    """Planted operator: 48 matmul units (half of heavy)."""
    return planted_work(x, 48)
