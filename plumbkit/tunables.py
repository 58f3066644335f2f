"""Every constant plumbkit took from a measurement or a judgement about a machine, in one place.

Each comes with where it came from (``From:`` the measurement and the commit that made it, found
with ``git log -S NAME``), the machine it was measured on (``Machine:``) and what would move it
(``Sensitive to:``). Where plumbkit already measures at run time what a constant stands in for,
``Measured at run time:`` says which measurement could replace it and what is missing.

The machine of every figure below, unless said otherwise, is the development VM: AMD EPYC, 2
cores, 23.5 GiB, TensorFlow 2.21.0, Python 3.11.7 (the ``machine`` of every
``benchmarks/results/*/report.json``, 2026-11-23 to 25), shared with other processes at times.
On another machine (more cores, another CPU, another TensorFlow) these are starting points,
not facts: re-measure them with the commit's experiment before trusting a figure they shape.
Pure Python, imports nothing: every module may import from it.
"""

from __future__ import annotations

# -- Epoch restarts (plumbkit.tfdata.runtime_costs.epoch_restart) ------------------------------

#: The share of an epoch at either end that its mid-epoch interval leaves out (it times the
#: middle three fifths, away from the restart): a shuffle buffer holding at least this share of
#: its epoch's elements fills or drains inside that middle, so the interval is not the steady rate.
#: From: a definition, not a measurement (the window of 06b1f10's restart measurement).
#: Machine: none (the same on every machine).
#: Sensitive to: nothing on the machine; a wider window reads noisier epochs.
MID_EPOCH_EDGE = 0.2

# -- Calibration: what an operator costs, run alone (plumbkit.tfdata.calibrate) --------------

#: Process CPU seconds one timed calibration run of an operator aims at.
#: From: a planted map, medians of three runs: at 0.02 s 0.5-1.5x its isolated truth, at
#: 0.05-0.06 s 0.9-1.2x (3cdbc4e); lowered to 0.04 once a run settles when any three runs agree
#: (eight-operator pipeline calibrated in 2.44-2.71 s, was 2.96-3.65) (9e23b54).
#: Machine: the dev VM (2 cores).
#: Sensitive to: clock resolution and scheduler noise (a busier or coarser-clocked machine needs
#: longer runs); calibration time grows with it.
TARGET_CPU_SECONDS = 0.04
#: Elements of the operator under test pulled per step of the calibration's graph loop (its
#: input alone: as many times the inputs it reads per element).
#: From: against the reduce-driven truth, a planted 110 us map read 1.10x it at one per step,
#: 1.03x at two, 0.93x at four, 0.85x at 64 (medians of eight); the accuracy bench's median
#: per-operator error fell from 20% to 15% going from one to two (668b4d8;
#: benchmarks/results/2026-11-25-accuracy).
#: Machine: the dev VM (2 cores), TF 2.21.
#: Sensitive to: the loop's own per-step CPU on this CPU and TensorFlow version (a blocking step
#: per element costs the loop's threads CPU of their own).
PULLED_PER_STEP = 2
#: A calibration run starts once the process used less than this share of one core ...
#: From: judgement, made with the first calibration (122cb62): idle TensorFlow threads wake now
#: and then; 15% of a core over QUIET_STEP_SECONDS is "quiet" on the dev VM. Not measured apart.
#: Machine: the dev VM (2 cores).
#: Sensitive to: TensorFlow's idle thread wake-ups (more cores: more pool threads waking).
QUIET_SHARE = 0.15
#: ... over this many wall seconds (see QUIET_SHARE).
#: From: judgement with QUIET_SHARE (122cb62); equal to one driver step (calibrate.NEXT_SECONDS).
#: Machine: the dev VM (2 cores).
#: Sensitive to: the clock's resolution and the scheduler's time slice.
QUIET_STEP_SECONDS = 0.003
#: A calibration settles when ROUNDS of its runs agree within this relative spread.
#: From: a median of three runs with a 40% spread was measured 20-50% off the truth; more runs
#: pull it back (3cdbc4e); "any ROUNDS of them" since 9e23b54 (half the operators of an
#: eight-operator pipeline had run all six rounds).
#: Machine: the dev VM (2 cores), shared with other agents' processes.
#: Sensitive to: run-to-run noise (neighbours, frequency scaling): a noisier machine runs more
#: rounds, up to MAX_ROUNDS, before settling.
SETTLED_SPREAD = 0.15
#: A thread counts as doing a run's work (its run-queue waits are charged) when it used at
#: least this share of the run's CPU.
#: From: judgement when run-queue waits were first counted per thread (7ac0794): idle threads of
#: other iterators wake now and then and would add their waits. Not measured apart.
#: Machine: the dev VM (2 cores).
#: Sensitive to: how many idle TensorFlow threads a process holds (more cores, more pools).
WORKER_SHARE = 0.05
#: A traced wall time per element this many times the calibrated CPU makes an operator a
#: candidate for the sequential latency probe.
#: From: judgement with the first calibration (122cb62): waiting for a core alone rarely
#: stretches an operator's wall time past 1.5x its CPU on 2 cores.
#: Machine: the dev VM (2 cores).
#: Sensitive to: the core count and the load (more cores: less waiting for one; a busy machine:
#: more operators probed, which costs time, not accuracy).
#: Measured at run time: the probe already reads the kernel's run-queue waits
#: (``host.threads.runnable_seconds``); the trace could read them too and replace this guess.
PROBE_CANDIDATE_RATIO = 1.5
#: Probed one call at a time, an operator whose wall time per element is at least this many
#: times its CPU mostly waits: it is latency-bound. One threshold for the calibration's probe
#: and the planner's cost model (it was typed twice, as WAITS_RATIO in calibrate.py).
#: From: 3 at first (122cb62, 14703eb), when the probe's wall time still counted waiting for a
#: core; it excludes run-queue waits since ad8aa39, so a computing operator reads about 1, and 2
#: is the definition itself: it waits longer than it computes. Lowered from 3 after two CI runs
#: read the tf.data guide's sleeping generator (25 ms waited per element) at 2.8 its CPU (process
#: CPU 11.9 ms per element where 5 ms was read here; the pools' spinning is counted as CPU).
#: Where the operator has a parallel form, calls in flight decide instead when the clocks
#: disagree (``OperatorCost.overlaps``).
#: Machine: the dev VM (2 cores); CI's.
#: Sensitive to: the core count and the load; an operator waiting 1-2x its CPU (fast storage,
#: a short sleep) is treated as CPU-bound.
LATENCY_RATIO = 2.0
#: Calls in flight for the second probe of a waiting operator (its CPU per element with many
#: calls in flight).
#: From: an 8 ms sleeping py_function: 0.70 ms of CPU per element one call at a time, 0.34 ms
#: with 8 calls in flight, 0.24 ms with 24 (each call's hand-offs and the consumer's wake-ups
#: are shared) (ad8aa39).
#: Machine: the dev VM (2 cores), TF 2.21.
#: Sensitive to: tf.data's per-call overhead (TensorFlow version) and the calls a plan gives.
IN_FLIGHT_CALLS = 16
#: Builds of an operator's parallel form its calibration measures (the median of their figures
#: is its parallel CPU per element): a parallel form's figure moves from one build of its iterator
#: to the next far beyond its runs' spread within a build. Five calls, one build each, within a
#: minute: the detection pipeline's box crop 77, 87, 92, 96 and 137 us per element (its plan's
#: CPU per minibatch then predicted 2.34-3.43 ms, measured 2.29-2.45 over five fresh builds), the
#: crop pipeline's random flip 36-46 us (``benchmarks/results/2026-11-28-read-back-settled/parcal.log``).
#: From: that measurement (at 15acaab): three, the fewest whose median drops one outlier.
#: Machine: the dev VM (2 cores), shared with other agents' processes.
#: Sensitive to: build-to-build noise (thread placement, neighbours); each build costs ~0.4 s.
PARALLEL_BUILDS = 3
#: The most calls in flight the planner gives a latency-bound operator, and so the calls in
#: flight of the third probe of a waiting Python operator: whatever it sustains there is its
#: ceiling in any plan (typed twice before, as QUEUED_CALLS in calibrate.py).
#: From: cap set with the resource model (14703eb); the probe at it (8b5b846): an 8 ms sleeping
#: py_function on 2 cores: 16 calls 1.9k elements/s, 32 3.3k, 64 3.8k, 96 4.0k, with 1.5 cores
#: busy (its calls queue for the GIL); GIL time 128 -> 246 us/element, predicted 621 -> 473
#: minibatches/s against 477-489 measured.
#: Machine: the dev VM (2 cores), TF 2.21, Python 3.11 (the GIL).
#: Sensitive to: the GIL's cost per call (Python version, free-threaded builds), the cores, the
#: thread pool's size; above it a waiting operator gains little (3.8k -> 4.0k at 96).
#: Measured at run time: the probe at this count measures the ceiling; the cap could be where
#: the measured rate stops growing, at the cost of more probes.
MAX_CONCURRENCY = 64
#: With MAX_CONCURRENCY calls in flight, calls that last this many times one call alone (by
#: Little's law: calls in flight / elements per second) queued for something ...
#: From: the queued-calls probe (8b5b846): an 8 ms sleeping py_function queues at 64 calls,
#: a 60 ms one does not (tested both sides).
#: Machine: the dev VM (2 cores), Python 3.11.
#: Sensitive to: the noise of one probe run; the GIL's cost per call.
QUEUED_STRETCH = 1.25
#: ... and it was not the cores when the probe kept less than this share of them busy.
#: From: judgement with QUEUED_STRETCH (8b5b846): the 8 ms py_function kept 1.5 of 2 cores
#: busy (0.75) while it queued for the GIL.
#: Machine: the dev VM (2 cores).
#: Sensitive to: neighbours' load (``available_cores`` counts the cores the process may use,
#: not the ones free) and the core count.
CORES_SPARE_SHARE = 0.85

#: Other processes' cores measured during a trace below this count as none: a plan is made for
#: every core, and the CPU limit keeps its plain name ("CPU (2 cores)").
#: From: judgement with /proc/stat's resolution: 100 ticks/s, so over a 2-3 s trace window one
#: tick is 0.002-0.005 cores, and the comparison's neighbours on the quiet bench machine read
#: 0.00-0.02 cores per contender (4472ebd, benchmarks/results/2026-11-26-tuning).
#: Machine: the dev VM (2 cores), shared with other agents' processes.
#: Sensitive to: the trace's length (shorter windows read coarser), background daemons.
NEIGHBOUR_FLOOR = 0.05
#: The comparison warns that the machine's load changed between the trace and the comparison
#: when other processes' cores differ by more than this (the plan was made for the cores free
#: during the trace).
#: From: judgement: a quarter of a core is 12% of the dev VM's two, about the prediction's
#: median error on the tuning set (13% at 4472ebd, benchmarks/results/2026-11-26-tuning).
#: Machine: the dev VM (2 cores).
#: Sensitive to: the core count (a larger machine needs a larger figure to matter).
LOAD_CHANGE_CORES = 0.25
#: The comparison says the machine moved between the trace and the comparison when your
#: pipeline's process CPU per minibatch differs by more than this share (the prediction was
#: made from the trace's reading).
#: From: one pipeline run for 150 s alone on the dev VM stepped 25% in its CPU per minibatch
#: (at 3f2ee96, benchmarks/results/2026-11-27-fused-scale/machine_drift.log); the bench rows
#: moved a median 10% (tuning) and 6% (held-out) between trace and comparison. A fifth sits
#: above that median.
#: Machine: the dev VM (2 cores, AMD EPYC).
#: Sensitive to: the host's other tenants; a short trace (a coarser reading).
DRIFT_SHARE = 0.2

# -- Bytes: what tf.data counts (plumbkit.analysis.operational, plumbkit.tfdata.memory_guard) -

#: Bytes of a ``tstring`` header: tf.data counts a string element's bytes as its payload plus
#: this. One figure for the analysis (bytes a cache will hold) and the memory guard (bytes it
#: counts), typed twice before.
#: From: tf.data's ``bytes_produced`` on the planted string pipelines (47b06b8); the guard counts
#: the same way (c760182).
#: Machine: not the machine: TensorFlow's ``tstring`` on a 64-bit build (TF 2.21).
#: Sensitive to: TensorFlow's string layout (a 32-bit build, a change of ``tstring``).
#: Measured at run time: it could be read once from ``bytes_produced`` of a one-string dataset,
#: but the analysis is pure Python and reads no TensorFlow; not worth the plumbing today.
STRING_HEADER_BYTES = 24

# -- Planning: from the LP's cores to threads (plumbkit.planning.decisions) ------------------

#: Never give a parallelizable operator fewer threads than this (the paper's hedge).
#: From: Plumber (MLSys 2022) §4.3: a mild hedge avoids a loss seen on skewed pipelines
#: (method.md §2); set with the first optimizer passes (190966b), applied to threads, not to the
#: LP, since 43d7f1a.
#: Machine: not measured here: the paper's; kept on the dev VM.
#: Sensitive to: the core count (on 2 cores two threads is every core).
HEDGE_PARALLELISM = 2
#: Share of the cores every costly operator keeps in the LP, so a cheap one is never starved.
#: From: the paper's hedge, set with the first optimizer passes (190966b). Not measured here.
#: Machine: not measured here: the paper's; kept on the dev VM.
#: Sensitive to: the core count and the number of operators (the floors are dropped when they
#: add up to more than the cores).
HEDGE_THETA = 0.05
#: Threads beyond ceil(theta) for an operator the LP gives more than one core: a parallel map's
#: threads also wait on hand-offs and on its output buffer, so ceil(theta) threads deliver less
#: than theta cores.
#: From: speech mask at theta 1.98: 2 threads 1871, 3 threads 2112, 4 threads 2264
#: minibatches/s against an LP bound of 2160 (3358caa).
#: Machine: the dev VM (2 cores), TF 2.21.
#: Sensitive to: the hand-off cost per element relative to the operator's work (cheap operators
#: wait more), the core count.
#: Measured at run time: the hand-off's CPU is measured (``runtime_costs.handoff_cost``) and
#: charged by the prediction, but not the time threads wait on it; calibrating the operator's
#: parallel form at theta threads (as ``engine.calibration`` does for one per core) would
#: measure what this guesses.
SPARE_THREADS = 1
#: Calls in flight for a waiting operator, over what Little's law gives at the bound: in flight
#: a call also waits for the GIL and for a core, so it lasts longer than one call alone (the
#: probe), and a call costs a thread, not a core.
#: From: an 8 ms sleeping py_function: the exact count, 9 calls, gave 126 minibatches/s against
#: a bound of 142; CI had planned 9 calls and reached 9x against 10x (ad8aa39).
#: Machine: the dev VM (2 cores), Python 3.11.
#: Sensitive to: the GIL and core contention of the calls (Python work per call, cores).
#: Measured at run time: the in-flight probe (IN_FLIGHT_CALLS) measures elements/s with 16
#: calls in flight, so the latency of a call in flight (16 / rate); Little's law on that
#: latency would replace this factor.
SPARE_CALLS = 1.25
#: A batch you wrote sequential is made parallel only when that is predicted this much faster.
#: From: the same plans with the batch sequential: speech 1,144-1,233 -> 1,379-1,414
#: minibatches/s, random flip 275-325 -> 354-370; a parallel batch costs more than the one
#: hand-off per minibatch the model charges it (3432b47).
#: Machine: the dev VM (2 cores), TF 2.21.
#: Sensitive to: what a parallel batch costs beyond its hand-off (its copy, breaking the
#: MapAndBatch fusion), the TensorFlow version.
#: Measured at run time: the hand-off is measured (``runtime_costs.handoff_cost``); the rest of
#: a parallel batch's cost could be calibrated in its parallel form like a map's, and the
#: margin then dropped.
PARALLEL_BATCH_GAIN = 1.10
#: More threads than you wrote for an operator ship only where the plan is predicted this much
#: faster with them than without them, and a plan (without a model in the loop) ships only where
#: it is predicted this much faster than your pipeline as written (``planning.worth_shipping``).
#: From: the bench at 73effba (benchmarks/results/2026-11-27-thread-time): the shuffled + random
#: crop plan gave four maps threads and was predicted 238 minibatches/s against 275 for yours as
#: written; it measured 276 (yours 274). Two plans of the held-out half gave light maps two threads
#: at a predicted gain of 0% and measured 0.82x and 0.93x yours (read after the fact: the rule is
#: not fitted to them, and their error is reported apart). For the whole plan: at 73effba the crop
#: and expert-tuned plans (tuning half) were predicted at 0.87x and 0.98x yours and measured no
#: change; at edd919f five held-out plans predicted at 1.00x yours measured 0.89-1.05x.
#: Machine: the dev VM (2 cores), TF 2.21.
#: Sensitive to: what a parallel form costs that its calibration misses; a larger factor leaves
#: more operators as written.
PREDICTED_GAIN = 1.02
#: An operator below a cache (free in steady state) gets threads for the first epoch, which
#: fills the cache, only when they are predicted to fill it at least this much faster: its
#: threads idle once the cache is full, so a small predicted gain is not worth a change.
#: From: judgement (issue 26, "the filling epoch is planned too", f86b4fa); the case it was made for
#: gains far more (an 8 ms fetch kept sequential: ~32 s for 4,000 elements; 16 calls in
#: flight: ~2 s, method.md). Not measured apart.
#: Machine: the dev VM (2 cores), TF 2.21.
#: Sensitive to: nothing measured; a larger margin only leaves more fills as written.
FILL_GAIN = 1.25
#: A prefetch at the top is added unless the model predicts the pipeline at least this much
#: faster without it: its buffer decouples the pipeline from a training step's pauses, which a
#: prediction from a bare ``next()`` loop does not see.
#: From: eight cached scalars per minibatch: 33-35k/s pulled directly, 16-19k/s through a
#: prefetch (f02a592); the small-minibatch test: 6.9k/s direct against 6.6k/s through a
#: prefetch, so the prefetch stays (84e6f15).
#: Machine: the dev VM (2 cores), TF 2.21.
#: Sensitive to: the consumer's cost per element and the training step's pauses.
#: Measured at run time: both consumer ceilings (with and without a prefetch,
#: ``runtime_costs.consumer_ceiling``) are measured and predicted from already; the 10% stands
#: for the training step's pauses, which nothing measures.
PREFETCH_LOSS = 1.1
#: Copies of a waiting source the interleave option reads side by side, at most.
#: From: judgement with the resource model and its offered options (14703eb). Not measured
#: apart.
#: Machine: the dev VM (2 cores).
#: Sensitive to: the files or shards the source can be split into and the memory of each copy.
MAX_SOURCE_COPIES = 16

# -- Memory (plumbkit.planning.budget) -------------------------------------------------------

#: An estimated cache size is grown by this share before it is compared with the budget.
#: From: the paper measured a few percent error on a cache's size after a minute of tracing,
#: more after seconds (b34074d); plumbkit traces seconds.
#: Machine: not measured here: the paper's figure, widened for short traces.
#: Sensitive to: how much of an epoch the trace sees and how much element sizes vary.
#: Measured at run time: the memory guard measures the fill itself and stops it past the
#: budget (``tfdata.memory_guard``); the margin only keeps the plan from choosing a cache the
#: guard will stop.
ESTIMATE_MARGIN = 0.25
#: Share of the available memory a budget is capped at (the rest: the process, TF's buffers).
#: From: judgement when the budget was capped at available memory (b34074d). Not measured.
#: Machine: the dev VM (23.5 GiB).
#: Sensitive to: the process's own memory (TensorFlow's buffers, the model) next to the cache:
#: on a small machine 20% may not be enough.
MAX_BUDGET_SHARE = 0.8

# -- The disk tier (plumbkit.planning.disk_tier, plumbkit.tfdata.disk_probe) -----------------

#: A disk tier is chosen only where the plan reading it back is predicted at least this much
#: faster than the plan recomputing what is below it: the tier costs a first epoch of writes and
#: gigabytes of disk, and its read figure comes from a probe of a few MB.
#: From: judgement (issue 26: "a tier slower than recomputing is never chosen"; the probe it
#: reads is e770f8c's); the case it was made for gains 1.32x (save/load of the resized images
#: against AUTOTUNE + a memory cache of the parsed records, method.md "A disk tier, by hand").
#: Not measured apart.
#: Machine: the dev VM (2 cores, a virtual disk reading ~130-450 MB/s), TF 2.21.
#: Sensitive to: the probe's spread under load (its read bandwidth varied 1.5-3x at load 8-12).
TIER_GAIN = 1.10
#: Share of a directory's free space a disk tier may take when no disk budget caps it (the user's
#: other files need the rest; the fill itself always leaves TIER_KEEP_FREE_BYTES).
#: From: judgement (e770f8c's probe reports the free space). Not measured. Machine: any.
#: Sensitive to: what else writes to that disk while the tier fills.
DISK_FREE_SHARE = 0.8

#: Free space a disk tier's fill always leaves on the disk, budget or not (the user's other files
#: need it): below it the fill stops with one line and removes what it wrote.
#: From: judgement with the fill guard (0477952). Not measured.
#: Machine: any.
#: Sensitive to: what else writes to that disk while the tier fills.
TIER_KEEP_FREE_BYTES = 256 * 2**20
#: Shards a disk tier is written in, read back interleaved one record from each in turn.
#: From: issue 26's measurement (save/load's default, one shard a core on this 2-core VM, read the
#: disk-bound images 2x faster than one stream); on a CPU-bound read 2 shards cost no more than
#: noise here (0477952).
#: Machine: the dev VM (2 cores), TF 2.21.
#: Sensitive to: the disk's gain from parallel reads (an NVMe gains with more); stored in each
#: cache's metadata, so changing it leaves existing caches readable.
TIER_SHARDS = 2
#: Bytes in one record of a disk tier, for elements small enough to share one.
#: From: 1 KB elements read as fast in records of 64 as of 1024 and filled 2x faster in records of
#: 1024 (2b922b3; plumbkit.tfdata.disk_tier's docstring).
#: Machine: the dev VM, TF 2.21, loaded.
#: Sensitive to: load's per-record cost on this TensorFlow.
TIER_RECORD_BYTES = 2**20
#: Elements this large or larger are written one to a record (``unbatch``'s copy outweighs the
#: per-record cost: 192 KB elements read 553 us one to a record, 1332 us five to a record).
#: From: the same measurement, between the 27 KB (gains) and 192 KB (loses) points: not tuned (04280f5).
#: Machine: the dev VM, TF 2.21.
#: Sensitive to: ``unbatch``'s copy cost against load's per-record cost.
TIER_ALONE_BYTES = 64 * 2**10
#: Bytes one disk probe writes: long enough that opening the tier is a small share of the read
#: (the first element's read is subtracted besides), short enough to cost ~0.1-0.3 s.
#: From: judgement with the probe (e770f8c), its cost timed on the dev VM.
#: Machine: the dev VM (a virtual disk reading ~130 MB/s evicted).
#: Sensitive to: the disk's speed (a slow disk makes the probe slower; a fast one, its opening a
#: larger share).
PROBE_BYTES = 8 * 1024 * 1024
#: Bytes each of the probe's timed writes holds (three, their medians taken): the write's CPU per
#: element is their CPU less a one-element write's, and that write's fixed cost (building the
#: save, tracing its shard function, starting its threads: 90-135 ms here) moves by ~20 ms. At
#: 8 MB (303 elements of 27 KB, ~36 ms to write) five probes read 45-180 us per element against a
#: 340 MB write's 122; at 32 MB four differences read 74-135 us against 110-125.
#: From: those measurements (at 12f8ae5, with the probe of 029bdf0), 27 KB elements, rounded to 32 MB.
#: Machine: the dev VM (2 cores).
#: Sensitive to: the save's fixed cost against the write's per-byte cost (a faster CPU: both less).
PROBE_WRITE_BYTES = 32 * 1024 * 1024
#: Bytes a minibatch of the probe's and the read-back's timed reads holds: Python's ``next()``
#: per minibatch costs the reading thread ~70 us and the process ~100 us, which the plan's
#: pipeline never pays (its operators pull from the tier in C++). At 256 KB (9 elements of 27 KB)
#: the read-back read 44-104 us of CPU per element, at 3.5 MB (128 elements) 33-46, interleaved
#: and evicted, three rounds (``benchmarks/results/2026-11-28-read-back-settled/loops.py``).
#: From: that measurement (at 844d090): 128 elements of 27 KB, rounded to 4 MB.
#: Machine: the dev VM (2 cores).
#: Sensitive to: Python's per-``next()`` cost on this CPU (a slower CPU: larger).
PROBE_READ_BATCH_BYTES = 4 * 1024 * 1024
#: Bytes of a filled disk tier read back (page cache evicted) before the plan is predicted: the
#: tier's own read replaces the probe's. A probe of a few MB reads what the VM's host still holds;
#: a tier of gigabytes read back at ~0.7 GB/s where the probe read 4.7, and its CPU per element
#: then rises with the system's share of the read (~1.6 ms per MB from the disk, next to none
#: from the host's cache). Stretches of 32-512 MB at the start of a 4.5 GB tier read at
#: 0.86-1.36 GB/s and 33-45 us of CPU per 27 KB element, the whole tier at 0.89-1.56 GB/s and
#: 31-53 us (two rounds each, session 42, ``benchmarks/results/2026-11-28-tier-read-back``).
#: From: that measurement (at 7d06c62): 128 MB, the shortest stretch whose read stayed within the
#: whole tier's spread in both rounds (32 MB read 0.86 GB/s once), doubled. Not tuned on the bench.
#: Machine: the dev VM (2 cores, a virtual disk the host caches).
#: Sensitive to: how much of a recent write the host keeps (a larger host cache: longer).
TIER_READ_BACK_BYTES = 256 * 1024 * 1024

# -- Offload to tf.data service (plumbkit.engine.offload, plumbkit.planning.offload) ---------

#: A core that gives a spinning probe less than this share is shared with other processes
#: (the client's, the workers'); the offload plan's ``dedicated`` uses the same figure (a
#: literal 0.8 beside it before).
#: From: judgement with the CPU-share probe (e1e06c0, e6901ec). Not measured apart.
#: Machine: the dev VM (2 cores), shared with other agents' processes.
#: Sensitive to: the probe's length and the scheduler's time slice.
DEDICATED = 0.8
#: A throughput within this factor of the target meets it (measurements are no finer).
#: From: judgement with the first offload model (d0199a9), equal to FastFlow's
#: SpeedUpThreshold (planning.offload.SPEEDUP_THRESHOLD). Not measured apart.
#: Machine: the dev VM (2 cores, loopback service).
#: Sensitive to: the spread of the offload measurements (a noisier machine needs more).
MEETS = 1.1
#: An exchange bound within this factor of the workers' CPU bound is named for the workers'
#: cores (near a saturated core the round trips wait for it).
#: From: the offload bench, where the chosen cut read as exchange-bound beside a saturated
#: worker core (b352b35).
#: Machine: the dev VM (2 cores, loopback service).
#: Sensitive to: the round trip's cost (network, not loopback) and the spread of the figures.
SATURATED = 1.03
