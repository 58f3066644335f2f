"""When, which part and how much to offload to tf.data service workers: the model, pure Python.

FastFlow's questions (Um et al., VLDB 2023, Algorithm 1) on stock tf.data service, in the
closed-system terms of the rest of plumbkit. A *cut* at operator ``k`` runs ``k`` and
everything below it on the workers and the rest on the client. Per root minibatch, measured:

- ``remote_cpu``: worker core-seconds to compute the remote part (the sub-pipeline alone);
- ``send_cpu`` / ``receive_cpu``: worker / client core-seconds to move the cut's elements
  (a cached sample of them served through the service on loopback);
- ``transfer_rate``: minibatches/s one worker moves when computing costs nothing;
- ``service_cpu`` / ``dispatcher_cpu``: what serving adds on the workers beyond computing and
  sending (the task runner, requests that wait for their element, and with DYNAMIC sharding
  every split fetched from the dispatcher: one RPC per element of a ``range``), and what the
  dispatcher spends; measured by serving the remote part alone, drained by the client with
  nothing above the cut. The served pipeline (client part included) is a separate run: what
  the predictions are checked against;
- ``client_cpu``: client core-seconds for the operators above the cut (run alone on a cached
  sample of the cut's elements);
- the consumer's own CPU and its ceiling (``take(1).cache().repeat()``) on the client.

Throughput with ``n`` workers of ``w`` cores and a client of ``c`` cores is the smallest of

    consumer ceiling,   c / (consumer + client_cpu + receive_cpu),
    n * w / (remote + send + service + dispatcher),   (the dispatcher shares the workers' cores)
    the element exchange (below),   bandwidth / bytes per minibatch,

and the sequential operators' own caps on either side (one core each, as in the LP).

The element exchange: tf.data service's client keeps one request in flight per worker (it
takes a worker's task and marks it in use until the element arrives), so each worker serves
its elements one round trip at a time. With nothing else running a round trip takes
``1 / (transfer_rate * V)`` (measured); with the worker's core computing and the client's core
running the operators above the cut, the sending and the receiving each wait for their core.
Processor sharing stretches a piece of CPU work ``t`` on a core busy ``rho`` of the time to
``t / (1 - rho)`` (the M/G/1-PS response time), so a round trip takes
``base * (R / (1 - rho_client) + S / (1 - rho_worker)) / (R + S)`` with ``R``, ``S`` the
receive and send CPU per element; throughput solves ``X = n / (V * round trip(X))``. Measured
on a cut that sends single elements (32 per minibatch), where the fully-overlapped model
over-predicted by 30-44%: the exchange model gave -3% and +5%.

The decision follows Algorithm 1: no offload when the local pipeline is within 10% of the
target; otherwise the cut that meets the target with the fewest workers (ties: the fewest bytes
per minibatch crossing the network, i.e. cuts below size-increasing operators), and the
smallest worker count that meets it. When no cut meets it, the cut that gives the most, unless
its plateau is within 10% of the local pipeline costed from that cut's own runs
(:func:`local_from_parts`: a speed-up judged from figures of one moment).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping, Sequence

from ..model.pipeline import Operator, Pipeline
from ..model.units import human_bytes
from ..tunables import MEETS, SATURATED

#: FastFlow's SpeedUpThreshold: below a 10% gain, offloading is not worth the remote resources.
SPEEDUP_THRESHOLD = 1.1
#: Cuts whose remote part carries less than this share of the pipeline's CPU offload nothing.
MIN_REMOTE_SHARE = 0.05
#: Kinds that grow elements (network volume) or only buffer: cut below them, not at them.
_BUFFER_KINDS = {"prefetch"}


@dataclass(frozen=True)
class CutCosts:
    """What was measured about one cut; CPU in core-seconds per root minibatch."""

    node: str
    label: str
    visit_ratio: float  # V_k: the cut's elements per minibatch
    bytes_per_minibatch: float | None  # what crosses the network per minibatch
    remote_cpu: float
    send_cpu: float
    receive_cpu: float
    transfer_rate: float  # minibatches/s one worker moves (cached sample), inf if not measured
    client_cpu: float  # operators above the cut
    service_cpu: float = 0.0  # what serving adds on the workers (task runner, waiting requests, DYNAMIC's splits)
    dispatcher_cpu: float = 0.0  # the dispatcher's core-seconds per minibatch (DYNAMIC hands out splits)
    remote_caps: tuple[float, ...] = ()  # minibatches/s each sequential remote operator allows
    client_caps: tuple[float, ...] = ()
    measured: Mapping[int, float] = field(default_factory=dict)  # workers -> served throughput (measured)


@dataclass(frozen=True)
class Setting:
    """The client, the consumer and the workers offered."""

    consumer_ceiling: float  # minibatches/s with a free pipeline (measured)
    consumer_cpu: float  # client core-seconds per step the consumer itself costs
    local: float  # the local pipeline: measured, or predicted when its core was shared (local_source)
    local_cpu: float  # client core-seconds per minibatch, local, consumer included
    client_cores: float
    cores_per_worker: float = 1.0
    bandwidth: float | None = None  # bytes/s worker -> client (None: as measured on loopback)
    local_caps: tuple[float, ...] = ()  # sequential operators' caps when all runs locally
    local_source: str = "measured"


@dataclass(frozen=True)
class Point:
    """Predicted throughput with ``workers`` workers, and the term that binds."""

    workers: int
    throughput: float
    bound: str


def predict_local(s: Setting) -> Point:
    """No workers: the client's cores run everything."""
    terms = {"consumer": s.consumer_ceiling,
             "client CPU": s.client_cores / max(s.local_cpu, 1e-12)}
    if s.local_caps:
        terms["a sequential operator"] = min(s.local_caps)
    bound = min(terms, key=terms.get)
    return Point(0, terms[bound], bound)


def local_from_parts(s: Setting, cut: CutCosts) -> float:
    """The local pipeline's throughput costed from the cut's own runs: the consumer, the part
    below the cut and the part above it, all on the client's cores. Whether a cut pays is
    judged against this, not against the local run: on the 2-core Intel VM the same pipeline's
    CPU per minibatch moved between 6.4 and 10.8 ms from one run to the next, seconds apart,
    and a cut costed in a slow moment "lost" to a local run measured in a fast one (notebook
    06 decided not to offload 4 times in 7; served had measured 1.1-2.4x local)."""
    parts = replace(s, local_cpu=s.consumer_cpu + cut.remote_cpu + cut.client_cpu, local_caps=())
    return predict_local(parts).throughput


def terms(s: Setting, cut: CutCosts, workers: int) -> dict[str, float]:
    """Every ceiling on throughput with ``workers`` workers at this cut (minibatches/s)."""
    client = s.consumer_cpu + cut.client_cpu + cut.receive_cpu
    worker = _worker_background(cut) + cut.send_cpu
    out = {"consumer": s.consumer_ceiling,
           "client CPU": s.client_cores / max(client, 1e-12),
           "workers' CPU": workers * s.cores_per_worker / max(worker, 1e-12),
           "element exchange": exchange_rate(s, cut, workers)}
    if cut.remote_caps:
        out["a sequential remote operator"] = workers * min(cut.remote_caps)
    if cut.client_caps:
        out["a sequential client operator"] = min(cut.client_caps)
    if s.bandwidth and cut.bytes_per_minibatch:
        out["network"] = s.bandwidth / cut.bytes_per_minibatch
    return out


def _worker_background(cut: CutCosts) -> float:
    """Worker core-seconds per minibatch besides sending: computing, DYNAMIC's splits, and the
    dispatcher (it shares the workers' cores)."""
    return cut.remote_cpu + cut.service_cpu + cut.dispatcher_cpu


def exchange_rate(s: Setting, cut: CutCosts, workers: int) -> float:
    """Minibatches/s the element exchange allows: one round trip in flight per worker, each
    stretched by the load on the cores that send and receive (see the module docstring)."""
    v = max(cut.visit_ratio, 1e-12)
    r, snd = cut.receive_cpu / v, cut.send_cpu / v
    if not math.isfinite(cut.transfer_rate) or cut.transfer_rate <= 0 or r + snd <= 0:
        return workers * cut.transfer_rate
    base = 1.0 / (cut.transfer_rate * v)  # seconds per element's round trip, nothing else running
    worker_load = _worker_background(cut) / s.cores_per_worker  # per minibatch, per worker core
    client_load = (s.consumer_cpu + cut.client_cpu) / s.client_cores

    def excess(x: float) -> float:  # > 0 while the exchange could go faster than x
        share = x / workers  # one worker's minibatches/s
        busy_worker = min(share * worker_load, 0.99)
        busy_client = min(x * client_load + (x - share) * cut.receive_cpu / s.client_cores, 0.99)
        trip = base * (r / (1 - busy_client) + snd / (1 - busy_worker)) / (r + snd)
        return workers / (v * trip) - x

    lo, hi = 0.0, workers * cut.transfer_rate
    for _ in range(50):  # bisection: the round trip only grows with throughput
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if excess(mid) > 0 else (lo, mid)
    return lo


def predict(s: Setting, cut: CutCosts, workers: int) -> Point:
    if workers <= 0:
        return predict_local(s)
    t = terms(s, cut, workers)
    bound = min(t, key=t.get)
    throughput = t[bound]
    if bound == "element exchange" and t["workers' CPU"] <= throughput * SATURATED:
        # Near a saturated worker core the round trip waits for that core: the core is the cause.
        bound = "workers' CPU (the element exchange waits for it)"
    return Point(workers, throughput, bound)


def curve(s: Setting, cut: CutCosts, max_workers: int) -> list[Point]:
    """Predicted throughput for 0 (local) .. ``max_workers`` workers."""
    return [predict(s, cut, n) for n in range(max_workers + 1)]


def workers_needed(s: Setting, cut: CutCosts, target: float, max_workers: int) -> int | None:
    """The smallest worker count whose predicted throughput meets ``target`` (None: none up to
    ``max_workers`` does: something that more workers do not relieve binds first)."""
    for n in range(1, max_workers + 1):
        if predict(s, cut, n).throughput * MEETS >= target:
            return n
    return None


def plateau(s: Setting, cut: CutCosts, max_workers: int) -> Point:
    """Where adding workers stops helping: the fewest workers within 5% of the best."""
    points = curve(s, cut, max_workers)[1:]
    best = max(p.throughput for p in points)
    return next(p for p in points if p.throughput >= 0.95 * best)


@dataclass(frozen=True)
class Decision:
    """What to do: ``offload`` (at ``cut``, with ``workers``), ``do not offload`` or ``cannot offload``."""

    action: str
    reason: str
    target: float
    cut: CutCosts | None = None
    workers: int | None = None  # recommended worker count (None with no offload)
    predicted: float | None = None  # at ``workers``
    meets_target: bool = False


def decide(s: Setting, cuts: Sequence[CutCosts], *, target: float | None = None,
           max_workers: int = 32, invalid: Mapping[str, str] | None = None) -> Decision:
    """FastFlow's Algorithm 1 with plumbkit's model: is there a stall, which cut, how many workers.

    ``target`` defaults to the consumer's ceiling. ``invalid`` explains cuts that cannot be
    offloaded (Python functions below them), for the message when none can.
    """
    goal = target if target is not None else s.consumer_ceiling
    local = s.local
    if local * SPEEDUP_THRESHOLD >= goal:
        return Decision("do not offload",
                        f"the local pipeline already runs at {local:.1f} minibatches/s ({s.local_source}), within "
                        f"{SPEEDUP_THRESHOLD - 1:.0%} of the target {goal:.1f}: offloading would only add "
                        f"the cost of moving elements", goal)
    if not cuts:
        why = "; ".join(f"{label}: {reason}" for label, reason in (invalid or {}).items())
        return Decision("cannot offload", f"no cut moves work a worker can do ({why or 'no candidate cut'})", goal)
    reach = {c.node: workers_needed(s, c, goal, max_workers) for c in cuts}
    reaching = [c for c in cuts if reach[c.node] is not None]
    if reaching:
        fewest = min(reach[c.node] for c in reaching)
        tied = [c for c in reaching if reach[c.node] == fewest]
        best_x = max(predict(s, c, fewest).throughput for c in tied)
        close = [c for c in tied if predict(s, c, fewest).throughput >= best_x / MEETS]
        chosen = min(close, key=lambda c: (c.bytes_per_minibatch or 0.0, -predict(s, c, fewest).throughput))
        point = predict(s, chosen, fewest)
        volume = (f", {human_bytes(chosen.bytes_per_minibatch)} per minibatch over the network"
                  if chosen.bytes_per_minibatch else "")
        return Decision("offload", f"cut after {chosen.label}: {fewest} worker{'s' * (fewest != 1)} "
                        f"of {s.cores_per_worker:g} core{'s' * (s.cores_per_worker != 1)} are predicted to "
                        f"give {point.throughput:.1f} minibatches/s (target {goal:.1f}; local "
                        f"{local:.1f} {s.local_source}){volume}", goal, chosen, fewest, point.throughput, True)
    plateaus = {c.node: plateau(s, c, max_workers) for c in cuts}
    chosen = max(cuts, key=lambda c: plateaus[c.node].throughput)
    top = plateaus[chosen.node]
    alike = local_from_parts(s, chosen)
    if top.throughput < alike * SPEEDUP_THRESHOLD:
        return Decision("do not offload",
                        f"no cut is predicted to beat the local pipeline by {SPEEDUP_THRESHOLD - 1:.0%}: the "
                        f"best, after {chosen.label}, levels off at {top.throughput:.1f} minibatches/s "
                        f"(bound: {top.bound}) against {alike:.1f} local, costed from the same runs "
                        f"(the local run: {local:.1f} {s.local_source})", goal, chosen)
    return Decision("offload", f"cut after {chosen.label}: the target {goal:.1f} is out of reach (bound: "
                    f"{top.bound}); {top.workers} worker{'s' * (top.workers != 1)} give the most, "
                    f"{top.throughput:.1f} minibatches/s (local {local:.1f} {s.local_source})",
                    goal, chosen, top.workers, top.throughput, False)


# -- candidate cuts ----------------------------------------------------------------------------

def chain(pipeline: Pipeline) -> list[Operator]:
    """The operators from the root down to the source along first inputs (root first)."""
    out = [pipeline[pipeline.root]]
    while out[-1].inputs:
        out.append(pipeline[out[-1].inputs[0]])
    return out


def invalid_cuts(pipeline: Pipeline, python_nodes: Mapping[str, str]) -> dict[str, str]:
    """Chain operators that cannot be cut at (label -> why): a Python function at or below them."""
    out = {}
    for op in chain(pipeline):
        below = [op] + pipeline.descendants(op.name)
        holders = [o for o in below if o.name in python_nodes]
        if holders:
            out[op.label] = (f"{holders[-1].label} runs Python ({python_nodes[holders[-1].name]}): its function "
                             f"lives in this process, a worker cannot call it ('Could not find callback "
                             f"with key=pyfunc_0')")
    return out


def candidate_cuts(pipeline: Pipeline, python_nodes: Mapping[str, str], *,
                   cpu_share: Mapping[str, float] | None = None,
                   bytes_per_minibatch: Mapping[str, float] | None = None, limit: int = 4) -> list[Operator]:
    """Where ``distribute()`` may go, at most ``limit``, root side first.

    Kept, in this order of priority: everything remote (the highest valid cut); the cut that
    moves closest to half the CPU to the workers (both sides busy; near-ties: :func:`half_split`);
    the highest cut below a batch (workers send single elements); cuts just below operators that
    grow the data (float conversion, padding: less network volume); the lowest cut that still
    holds the most expensive operator. Never at a prefetch (cut at what it buffers), never holding
    Python, never offloading less than 5% of the CPU.
    """
    bad = invalid_cuts(pipeline, python_nodes)
    share = cpu_share or {}
    sizes = bytes_per_minibatch or {}
    ops = chain(pipeline)
    valid = [op for op in ops if op.label not in bad and op.kind not in _BUFFER_KINDS]

    if share:
        valid = [op for op in valid if remote_share(pipeline, op, share) >= MIN_REMOTE_SHARE]
    if not valid:
        return []
    picked: list[Operator] = [valid[0]]
    if share:
        picked.append(half_split(pipeline, valid, share))
    batches = [i for i, op in enumerate(ops) if op.kind in ("batch", "padded_batch", "map_and_batch")]
    if batches:
        below = [op for op in valid if ops.index(op) > batches[-1]]
        picked += below[:1]
    for i, op in enumerate(ops[:-1]):
        child = ops[i + 1]
        if child.name in {v.name for v in valid} and sizes.get(op.name, 0) > 1.3 * sizes.get(child.name, math.inf):
            picked.append(child)
    if share:
        heaviest = max(ops, key=lambda o: share.get(o.name, 0.0))
        holding = [op for op in valid
                   if heaviest.name in {op.name} | {d.name for d in pipeline.descendants(op.name)}]
        picked += holding[-1:]
    picked += valid
    names = list(dict.fromkeys(op.name for op in picked))[:limit]
    return [op for op in ops if op.name in names]


def half_split(pipeline: Pipeline, valid: Sequence[Operator], cpu_share: Mapping[str, float]) -> Operator:
    """The cut that keeps both sides busy: the one moving closest to half the CPU to the workers.

    Cuts whose distances to half differ by less than MIN_REMOTE_SHARE are a tie (a share that
    small is measured noise, and a cut moving it alone offloads nothing), won by the cut nearest
    the root (``valid`` is root first): it moves the elements after more of the pipeline ran,
    e.g. a batch's minibatches instead of their elements. Without the rule, ``map`` and the
    ``batch(32)`` above it, apart by the batch's ~0.001 share, swapped places as the measured
    shares moved around one half.
    """
    distance = {op.name: abs(remote_share(pipeline, op, cpu_share) - 0.5) for op in valid}
    best = min(distance.values())
    return next(op for op in valid if distance[op.name] - best < MIN_REMOTE_SHARE)


def remote_share(pipeline: Pipeline, op: Operator, cpu_share: Mapping[str, float]) -> float:
    """Share of the pipeline's CPU a cut at ``op`` would move to the workers."""
    return sum(cpu_share.get(o.name, 0.0) for o in [op] + pipeline.descendants(op.name))


def unhelpful_cuts(pipeline: Pipeline, python_nodes: Mapping[str, str],
                   cpu_share: Mapping[str, float]) -> dict[str, str]:
    """Cuts that could run on a worker but would move almost no work there (label -> why)."""
    bad = invalid_cuts(pipeline, python_nodes)
    out = {}
    for op in chain(pipeline):
        if op.label in bad or op.kind in _BUFFER_KINDS:
            continue
        share = remote_share(pipeline, op, cpu_share)
        if share < MIN_REMOTE_SHARE:
            out[op.label] = f"would move only {share:.0%} of the pipeline's CPU to the workers"
    return out


def sequential_caps(costs: Mapping[str, float], sequential: Iterable[str]) -> tuple[float, ...]:
    """Minibatches/s each sequential operator allows on one core: 1 / its CPU per minibatch."""
    return tuple(1.0 / costs[n] for n in sequential if costs.get(n, 0.0) > 0)


__all__ = ["CutCosts", "Decision", "Point", "SPEEDUP_THRESHOLD", "Setting", "candidate_cuts", "chain",
           "curve", "decide", "exchange_rate", "half_split", "invalid_cuts", "plateau", "predict", "predict_local",
           "remote_share", "sequential_caps", "terms", "unhelpful_cuts", "workers_needed"]
