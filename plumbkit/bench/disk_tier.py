"""Issue 26's goals, measured: a disk tier where users train, on data larger than memory.

- **image**: the larger-than-memory image pipeline at a memory budget a quarter of its decoded
  size, the disk tier on (``disk_budget``, ``cache_dir`` under the bench's out folder). Under one
  protocol: yours, AUTOTUNE, AUTOTUNE + the same memory cache (the memory-only plan's, today's
  plan), AUTOTUNE + the same disk cache, the memory-only plan and the plan with its tier. The
  steady state and the first epoch (the fill: the tier cleared, then one epoch timed from the
  build on) predicted before the fact against measured.
- **evaluation**: the same protocol on an evaluation pipeline (decode, resize, no shuffle) whose
  JPEG records are several GB on disk (``eval_gb``).
- **shuffled option**: the shuffled training pipeline, whose decode sits above a record shuffle;
  the option the plan offers (cache the decoded records, shuffle above the cache with a named
  buffer) is turned on by hand, as its note tells the user, and measured beside the plan: an
  option, never the plan.

Before every measured run, and every :data:`KEEP_EVICTED_EVERY` seconds while the contenders run
(:func:`kept_evicted`), the source files and the tier's files are evicted from the page cache
(``posix_fadvise``), so a tier is read from the disk every epoch, as the plan's read-back measured
it and as data larger than memory is read. Everything
the section writes is removed at the end; the report says how many bytes it wrote.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import shutil
import statistics
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import tensorflow as tf

from ..engine import baselines, optimize
from ..engine.compare import Contender, Protocol
from ..engine.optimization import AUTOTUNE_WITH, AUTOTUNE_WITH_DISK
from ..model.disk_tier import clear_caches, list_caches, tree_bytes
from ..model.plan import Change
from ..tfdata.disk import evict_from_page_cache
from ..tfdata.disk_tier import on_disk
from ..tfdata.graph import pipeline_of
from ..tfdata.rebuild import apply_changes
from . import examples
from . import pipelines as bench_pipelines
from .alike import Log, attempt, error, failed, measured_alike, num, ratio_cell, signed_pct, written_bytes

SECTION = "disk_tier"
MEMORY_RIVAL = AUTOTUNE_WITH  # AUTOTUNE + the memory-only plan's cache and prefetch
DISK_RIVAL = AUTOTUNE_WITH_DISK  # AUTOTUNE above the plan's tier, the same tier read back
MEMORY_PLAN = "plumbkit, memory only"
PLAN = "plumbkit"
OPTION = "option, turned on"
OPTION_RIVAL = "autotune + option's cache"
#: Minibatch size of every pipeline here (the bench's image pipelines').
BATCH = 32


def evictor(paths: list[str], cache_dir: Path) -> Callable[[str], None]:
    """Drops the source files and every file of the tier from the page cache."""
    def evict(_name: str) -> None:
        tier = [str(f) for f in cache_dir.rglob("*") if f.is_file()] if cache_dir.exists() else []
        evict_from_page_cache(list(paths) + tier)
    return evict


#: Seconds between two evictions while the contenders run (:func:`kept_evicted`): shorter than an
#: epoch of the image row's tier at its fastest (0.34 GB at ~1 GB/s), and a pass over the
#: evaluation row's ~520 files costs ~8 ms of CPU (3% of a core at this period).
KEEP_EVICTED_EVERY = 0.25


@contextlib.contextmanager
def kept_evicted(evict: Callable[[str], None], every: float = KEEP_EVICTED_EVERY) -> Iterator[None]:
    """The page cache kept empty of the data and the tier while the block runs (``evict`` every
    ``every`` seconds, on a thread of its own). Why: evicting before each run alone let a window
    longer than the tier's epoch read its second pass from memory: the 0.34 GB image tier reads
    an epoch in ~0.4 s, the 4.5 GB evaluation tier fits this machine's memory too, and the plan's
    steady state then measured 27-38% above a prediction made for data read from the disk
    (session 42). Data larger than memory is read from the disk every epoch; so is this."""
    stop = threading.Event()

    def keep() -> None:
        while not stop.wait(every):
            evict("kept evicted")

    thread = threading.Thread(target=keep, name="plumbkit-bench-evictor", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def tier_changes(changes: list[Change]) -> list[Change]:
    return [c for c in changes if c.what == "disk_tier"]


def tier_rows(cache_dir: Path) -> list[dict]:
    """What is on disk: each cache's form, size, elements and where."""
    return [{"fingerprint": e.fingerprint, "form": e.form, "bytes": e.bytes, "elements": e.elements,
             "complete": e.complete, "path": str(e.path)} for e in list_caches(cache_dir)]


def timed_first_epochs(make: Callable, changes: list[Change], cache_dir: Path, *, epoch_batches: int,
                       rounds: int, evict: Callable[[str], None], log: Log) -> list[float]:
    """Seconds of the plan's first epoch, ``rounds`` times: the tier cleared and the data evicted,
    then timed from the build (the rebuild fills the tier) to the epoch's last minibatch."""
    seconds = []
    for r in range(rounds):
        log(f"  first epoch {r + 1} of {rounds}: the tier cleared, filled, read back")
        clear_caches(cache_dir)
        evict("fill")
        began = last = time.perf_counter()
        for _ in apply_changes(make(), changes).take(epoch_batches):
            last = time.perf_counter()
        # to the last minibatch, not past the iterator's deletion, which may wait on tf.data's
        # autotuning thread (0.2-2.6 s here) where a training loop keeps its iterator
        seconds.append(last - began)
    return seconds


def contenders(make: Callable, memory, plan) -> list[Contender]:
    """Yours, AUTOTUNE, AUTOTUNE + the memory-only plan's cache, AUTOTUNE + the plan's disk tier
    (where it has one), the memory-only plan and the plan."""
    cores = plan.trace.cores
    out = [Contender("yours", make, plan.yours_warmup_batches),
           Contender("autotune", lambda: baselines.autotune(make(), cores), plan.yours_warmup_batches),
           Contender(MEMORY_RIVAL, lambda: baselines.autotune_with(make(), memory.proposed_changes, cores),
                     memory.warmup_batches)]
    if tier_changes(plan.proposed_changes):
        out.append(Contender(DISK_RIVAL, lambda: baselines.autotune_with_disk(make(), plan.proposed_changes, cores),
                             plan.warmup_batches))
    return out + [Contender(MEMORY_PLAN, lambda: apply_changes(make(), memory.proposed_changes), memory.warmup_batches),
                  Contender(PLAN, lambda: apply_changes(make(), plan.proposed_changes), plan.warmup_batches)]


def plan_summary(plan) -> dict:
    """What the plan chose and predicted before the fact."""
    fill, tiers = plan.fill_prediction, tier_changes(plan.proposed_changes)
    return {"tier": "disk" if tiers else plan.cache.tier, "cache": tiers[0].where if tiers else plan.cache.label,
            "directory": str(tiers[0].value) if tiers else plan.cache.directory,
            "cache_bytes": plan.cache.bytes, "cache_why": plan.cache.why,
            "predicted": plan.prediction.throughput, "binding": plan.prediction.binding,
            "predicted_fill": fill.throughput if fill else None, "fill_binding": fill.binding if fill else None,
            "predicted_fill_seconds": plan.fill_seconds, "tier_plan": str(plan.tier) if plan.tier else None,
            "read_bandwidth": plan.tier.measurement.read_bandwidth if plan.tier else None,
            "write_bandwidth": plan.tier.measurement.write_bandwidth if plan.tier else None,
            "read_back_bytes": plan.tier.measurement.read_back_bytes if plan.tier else None,
            "read_cpu_per_element": plan.tier.measurement.read_cpu_per_element if plan.tier else None,
            "write_cpu_per_element": plan.tier.measurement.write_cpu_per_element if plan.tier else None,
            "changes": [str(c) for c in plan.proposed_changes],
            "options": [str(o) for o in plan.options], "notes": plan.notes}


def tiered(name: str, make: Callable, *, memory_budget: float, disk_budget: float, cache_dir: Path,
           paths: list[str], epoch_batches: int, seconds: float, protocol: Protocol, fill_rounds: int,
           log: Log, regime: str = "") -> dict:
    """One pipeline: the memory-only plan and the plan with the disk tier, measured alike with
    the baselines; the tier's first epoch timed apart."""
    evict = evictor(paths, cache_dir)
    common = dict(seconds=seconds, compare=False, protocol=protocol, memory_budget=memory_budget,
                  before_each=evict, cache_dir=str(cache_dir), on_progress=lambda m, f: log(f"[{name}]   {m}"))
    log(f"[{name}] the memory-only plan (today's; no disk budget: the tier at most offered)")
    memory = optimize(make, **common)
    log(f"[{name}] the plan with the disk tier ({disk_budget / 1e9:.2f} GB in {cache_dir})")
    plan = optimize(make, **common, disk_budget=disk_budget)
    ratios = [(PLAN, other) for other in ("yours", "autotune", MEMORY_RIVAL, DISK_RIVAL, MEMORY_PLAN)]
    chosen = contenders(make, memory, plan)
    names = {c.name for c in chosen}
    measured_by = epoch_windows(protocol, epoch_batches, plan.predicted_throughput)
    with kept_evicted(evict):
        row = measured_alike(name, chosen, measured_by, ratios=[r for r in ratios if r[1] in names], log=log,
                             before_each=evict)
    on_disk_now = tier_rows(cache_dir)
    fills = (timed_first_epochs(make, plan.proposed_changes, cache_dir, epoch_batches=epoch_batches,
                                rounds=fill_rounds, evict=evict, log=log)
             if tier_changes(plan.proposed_changes) else [])
    measured_fill = statistics.median(fills) if fills else None
    fill_rate = epoch_batches / measured_fill if measured_fill else None
    summary = plan_summary(plan)
    tier_bytes = sum(e["bytes"] for e in on_disk_now)
    return {"pipeline": name, "regime": regime, **row, "plan": summary, "memory_plan": plan_summary(memory),
            "memory_budget": memory_budget, "disk_budget": disk_budget, "epoch_batches": epoch_batches,
            "on_disk": on_disk_now, "tier_bytes": tier_bytes,
            "window_seconds": measured_by.window if measured_by.window > protocol.window else None,  # lengthened only
            "tier_bytes_written": tier_bytes * (1 + len(fills)),  # optimize's fill, then each timed one
            "steady_error": error(summary["predicted"], row["measured"].get(PLAN)),
            "first_epoch_seconds": fills, "measured_fill_seconds": measured_fill,
            "measured_fill": fill_rate, "fill_error": error(summary["predicted_fill_seconds"], measured_fill)}


def epoch_windows(protocol: Protocol, epoch_batches: int, predicted: float) -> Protocol:
    """``protocol`` with windows at least one epoch long at the plan's predicted rate, at most two
    of them to settle. Why: a tier read cold moves within its epoch, and the same stretch slows on
    every pass. The 4.5 GB evaluation tier read 450-500 minibatches/s for ~4 s of its ~9 s epoch
    and 600-870 the rest (CPU per minibatch 3.5-3.9 ms there, 2.0-2.5 elsewhere). Two 1 s windows
    agreed on the slow stretch, so the first run measured 462 where the epoch averaged ~565; a
    user whose data does not fit in memory gets the epoch's average. Every contender of the row
    gets the same windows (those of the slower ones span less than their epoch). Cost: the
    section took 37 minutes with them, against 29 (benchmarks/results/2026-11-27-disk-tier-2)."""
    seconds = epoch_batches / predicted if predicted > 0 else 0.0
    if seconds <= protocol.window:
        return protocol
    return dataclasses.replace(protocol, window=seconds, max_windows=min(protocol.max_windows, 2))


def evaluation_records(directory: Path, *, gigabytes: float, size: int = 256, per_file: int = 512) -> list[str]:
    """JPEG TFRecords totalling ``gigabytes`` on disk: one file of ``per_file`` distinct images of
    ``size`` pixels, copied as many times as it takes (decoding costs what distinct images cost;
    writing several GB is the disk's work, not the JPEG encoder's)."""
    first = examples.write_image_records(directory / "distinct", files=1, per_file=per_file, size=size)[0]
    copies = max(1, math.ceil(gigabytes * 1e9 / Path(first).stat().st_size))
    paths = []
    for i in range(copies):
        paths.append(str(directory / f"eval-{i:04d}.tfrecord"))
        shutil.copyfile(first, paths[-1])
    shutil.rmtree(directory / "distinct")
    return paths


def evaluation(paths: list[str]) -> Callable[[], tf.data.Dataset]:
    """An evaluation pipeline as written: records, parse, decode, resize, normalize, batch; no
    shuffle, no augmentation; epochs repeated."""
    return lambda: examples.image_pipeline(paths, batch_size=BATCH, epochs=None)


def image_case(data: str, cache_dir: Path, **sizes) -> dict[str, Any]:
    """The bench's larger-than-memory image pipeline at a quarter of its decoded size."""
    sizes = sizes or dict(files=24, per_file=512)
    decoded = bench_pipelines.decoded_bytes(**sizes)
    images = sizes["files"] * sizes["per_file"]
    return dict(make=bench_pipelines.image_larger_than_memory(data, **sizes), memory_budget=decoded / 4,
                disk_budget=2.0 * decoded, cache_dir=cache_dir,
                paths=bench_pipelines.image_records(data, **sizes), epoch_batches=math.ceil(images / BATCH),
                regime=f"{images:,} JPEGs (128 px), decoded {decoded / 1e6:,.0f} MB; memory budget a quarter "
                       f"of it, disk budget twice it")


def evaluation_case(directory: Path, cache_dir: Path, *, gigabytes: float, size: int = 256,
                    per_file: int = 512) -> dict[str, Any]:
    """The evaluation pipeline over ``gigabytes`` of records, at a memory budget a quarter of its
    resized images' size (a quarter of the decoded size would hold them whole: 256 px decoded is 7x
    the 96 px resized), so memory holds neither them nor the records."""
    paths = evaluation_records(directory, gigabytes=gigabytes, size=size, per_file=per_file)
    images = len(paths) * per_file
    resized = images * 96 * 96 * 3
    on_disk_bytes = sum(Path(p).stat().st_size for p in paths)
    return dict(make=evaluation(paths), memory_budget=resized / 4, disk_budget=2.0 * resized,
                cache_dir=cache_dir, paths=paths, epoch_batches=math.ceil(images / BATCH),
                regime=f"{images:,} JPEGs ({size} px), {on_disk_bytes / 1e9:,.2f} GB on disk, resized (uint8, "
                       f"96 px) {resized / 1e9:,.1f} GB; memory budget a quarter of that, disk budget twice it")


def reordered_training(paths: list[str], *, buffer: int, cache: Callable) -> Callable[[], tf.data.Dataset]:
    """The shuffled training pipeline with the option turned on by hand, as its note tells the
    user: files read in their listed order, records parsed and decoded, ``cache`` d, shuffled
    above the cache with the same buffer, then the random crop and flip."""
    def make() -> tf.data.Dataset:
        ds = tf.data.Dataset.from_tensor_slices(paths).interleave(tf.data.TFRecordDataset, cycle_length=4)
        ds = cache(ds.map(examples.parse_example).map(examples.decode_image))
        ds = ds.shuffle(buffer).map(bench_pipelines.crop_and_flip).map(bench_pipelines.to_unit_range)
        return ds.batch(BATCH).repeat()
    return make


def the_option(plan):
    """The shuffle-above-the-cache option the plan offers (None: none offered)."""
    from ..planning.shuffle_option import SHUFFLE_ABOVE  # with the disk tier's planning
    return next((o for o in plan.options if any(c.what == SHUFFLE_ABOVE for c in o.changes)), None)


def by_label(changes: list[Change], ds: tf.data.Dataset) -> list[Change]:
    """The plan's threads and prefetch, put on the operators of ``ds`` that carry the same labels
    (those above the option's cache: what is below it runs only in the fill, in ``on_disk``'s own)."""
    names = {op.label: op.name for op in pipeline_of(ds)}
    return [Change(c.what, c.where, names[c.where], c.value, c.why) for c in changes
            if c.what in ("parallelism", "prefetch") and c.where in names]


def option_cache(option, cache_dir: Path) -> tuple[Callable, str]:
    """The option's cache as the user writes it: ``on_disk`` where the option holds a disk tier,
    a memory ``cache()`` otherwise."""
    if any(c.what == "disk_tier" for c in option.changes):
        return (lambda ds: on_disk(ds, cache_dir)), "disk"
    return (lambda ds: ds.cache()), "memory"


def shuffled_option(name: str, data: str, *, cache_dir: Path, seconds: float, protocol: Protocol, log: Log,
                    files: int = 16, per_file: int = 256) -> dict:
    """The shuffled training pipeline: yours, AUTOTUNE and the plan (which keeps the order), beside
    the option it offers turned on (with the plan's threads) and AUTOTUNE over that same rewrite."""
    make = bench_pipelines.shuffled_training(data, files=files, per_file=per_file)
    log(f"[{name}] optimizing (disk tier on, so the option may use it)")
    plan = optimize(make, seconds=seconds, compare=False, protocol=protocol, disk_budget=4.0 * files * per_file
                    * 128 * 128 * 3, cache_dir=str(cache_dir), on_progress=lambda m, f: log(f"[{name}]   {m}"))
    option = the_option(plan)
    row = {"pipeline": name, "plan": plan_summary(plan), "option": None}
    if option is None:
        return row
    cache, tier = option_cache(option, cache_dir)
    reordered = reordered_training(bench_pipelines.image_records(data, files=files, per_file=per_file),
                                   buffer=next(int(c.value) for c in option.changes if c.what == "shuffle_above"),
                                   cache=cache)
    threads = by_label(plan.proposed_changes, reordered())
    fill = math.ceil(files * per_file / BATCH) + 2 if tier == "memory" else 0
    chosen = [Contender("yours", make, plan.yours_warmup_batches),
              Contender("autotune", lambda: baselines.autotune(make(), plan.trace.cores), plan.yours_warmup_batches),
              Contender(PLAN, lambda: apply_changes(make(), plan.proposed_changes), plan.warmup_batches),
              Contender(OPTION_RIVAL, lambda: baselines.autotune(reordered(), plan.trace.cores), fill),
              Contender(OPTION, lambda: apply_changes(reordered(), threads), fill)]
    measured = measured_alike(name, chosen, protocol, log=log,
                              ratios=[(OPTION, PLAN), (OPTION, "yours"), (OPTION, OPTION_RIVAL), (PLAN, "yours")])
    return {**row, **measured, "option": {
        "title": option.title, "note": option.note, "tier": tier, "predicted": option.predicted_throughput,
        "plan_predicted": option.plan_throughput, "predicted_gain": option.gain,
        "threads": [str(c) for c in threads],
        "error": error(option.predicted_throughput, measured["measured"].get(OPTION))},
        "plan_error": error(plan.prediction.throughput, measured["measured"].get(PLAN)),
        "on_disk": tier_rows(cache_dir)}


def disk_tier_section(data: str, out: Path, *, seconds: float, protocol: Protocol, log: Log,
                      eval_gb: float = 3.0, fill_rounds: int = 3, image_sizes: dict | None = None,
                      eval_sizes: dict | None = None, shuffled_sizes: dict | None = None) -> dict:
    """The three rows, each its cache directory under ``out``; everything written removed at the end."""
    root = out / "disk-tier"
    began = written_bytes()
    rows: dict[str, Any] = {}
    common = dict(seconds=seconds, protocol=protocol, log=log)
    try:
        attempt(rows, "image", log, lambda: tiered(
            "image larger than memory, disk tier", **image_case(data, root / "image-cache", **(image_sizes or {})),
            fill_rounds=fill_rounds, **common))
        log(f"[disk tier] writing {eval_gb:g} GB of evaluation records")
        attempt(rows, "evaluation", log, lambda: tiered(
            f"evaluation, {eval_gb:g} GB on disk", **evaluation_case(root / "eval-data", root / "eval-cache",
                                                                    gigabytes=eval_gb, **(eval_sizes or {})),
            fill_rounds=1, **common))
        attempt(rows, "shuffled", log, lambda: shuffled_option(
            "image shuffled + random crop, option", data, cache_dir=root / "shuffled-cache", **common,
            **(shuffled_sizes or {})))
    finally:
        ended = written_bytes()
        removed = tree_bytes(root) if root.exists() else 0
        shutil.rmtree(root, ignore_errors=True)
    written = ended - began if began is not None and ended is not None else None
    return {"rows": rows, "bytes_written": written, "bytes_removed": removed, "eval_gb": eval_gb,
            "fill_rounds": fill_rounds}


def _gb(x: float | None) -> str:
    return "—" if x is None else f"{x / 1e9:,.2f} GB"


def _tier_cell(row: dict) -> str:
    plan = row["plan"]
    if plan["tier"] != "disk":
        return f"none: {plan['tier']} cache at {plan['cache'] or '—'}"
    forms = ", ".join(sorted({e["form"] for e in row["on_disk"]})) or "—"
    return f"disk at {plan['cache']} ({forms}, {_gb(row['tier_bytes'])})"


def _fill_cell(row: dict) -> str:
    plan = row["plan"]
    return (f"{num(plan['predicted_fill_seconds'])} s, {num(row['measured_fill_seconds'])} s "
            f"({signed_pct(row['fill_error'])}); written at {num(plan['predicted_fill'])}/s predicted "
            f"({plan['fill_binding'] or '—'}), the epoch's mean {num(row['measured_fill'])}/s measured")


def tiered_lines(rows: list[dict]) -> list[str]:
    names = ("yours", "autotune", MEMORY_RIVAL, DISK_RIVAL, MEMORY_PLAN, PLAN)
    lines = ["| pipeline | yours | AUTOTUNE | AUTOTUNE + same memory cache | AUTOTUNE + same disk cache | "
             "plumbkit, memory only | plumbkit (disk tier on) |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['pipeline']} | " + " | ".join(
            "failed" if k in r["failed"] else num(r["measured"].get(k)) for k in names) + " |")
    lines += ["", "| pipeline | tier chosen (form, size) | plumbkit / AUTOTUNE + same memory cache (goal ≥ 1.25×) "
              "| / AUTOTUNE + same disk cache | / memory-only plan | / yours | steady: predicted (bound), error "
              "(goal ±15%) | first epoch: predicted, measured (error; goal ±25%) | tier bytes written |",
              "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        s, plan = r["speedups"], r["plan"]
        lines.append(f"| {r['pipeline']} | {_tier_cell(r)} | {ratio_cell(s.get(f'{PLAN} / {MEMORY_RIVAL}'))} | "
                     f"{ratio_cell(s.get(f'{PLAN} / {DISK_RIVAL}'))} | "
                     f"{ratio_cell(s.get(f'{PLAN} / {MEMORY_PLAN}'))} | "
                     f"{ratio_cell(s.get(f'{PLAN} / yours'))} | {num(plan['predicted'])} ({plan['binding']}), "
                     f"{signed_pct(r['steady_error'])} | {_fill_cell(r)} | {_gb(r['tier_bytes_written'])} |")
    return lines + [""] + [f"- **{r['pipeline']}** — {r['regime']}. "
                           f"{r['plan']['tier_plan'] or r['plan']['cache_why']}" for r in rows]


def option_lines(row: dict) -> list[str]:
    o = row["option"]
    if o is None:
        return [f"- **{row['pipeline']}**: no option offered; the plan's notes: "
                + ("; ".join(row["plan"]["notes"]) or "none")]
    names = ("yours", "autotune", PLAN, OPTION_RIVAL, OPTION)
    s = row["speedups"]
    return ["| pipeline | yours | AUTOTUNE | plumbkit (the plan) | AUTOTUNE + option's cache | option, turned on | "
            "option / plan | option / AUTOTUNE + its cache | option: predicted, error | plan: error |",
            "|---|---|---|---|---|---|---|---|---|---|",
            f"| {row['pipeline']} | " + " | ".join("failed" if k in row["failed"] else num(row["measured"].get(k))
                                                  for k in names)
            + f" | {ratio_cell(s.get(f'{OPTION} / {PLAN}'))} | {ratio_cell(s.get(f'{OPTION} / {OPTION_RIVAL}'))} | "
              f"{num(o['predicted'])}, {signed_pct(o['error'])} | {signed_pct(row['plan_error'])} |", "",
            f"- Option ({o['tier']} cache): {o['title']}. {o['note']}. Turned on by hand with the plan's threads "
            f"({', '.join(o['threads']) or 'none'})."]


def markdown(section: dict | None) -> list[str]:
    """The report's lines for the section (none when it did not run)."""
    if not section:
        return []
    rows = section["rows"]
    lines = ["## Disk tier (issue 26)", "",
             "Minibatches/s, medians of interleaved rounds under the end-to-end protocol; the source files and "
             "the tier's files evicted from the page cache before every run and every "
             f"{KEEP_EVICTED_EVERY:g} s while the contenders run (data larger than memory: read from the disk every epoch). "
             "*Predicted* before the fact. "
             "First epoch: the tier cleared, then timed from the build to the epoch's last minibatch "
             f"(median of {section['fill_rounds']} for the image pipeline, 1 for the evaluation one).", ""]
    tiered_rows = [rows[k] for k in ("image", "evaluation") if k in rows and not failed(rows[k])]
    long = [f"{r['pipeline']} {r['window_seconds']:.1f} s" for r in tiered_rows if r.get("window_seconds")]
    if long:  # windows an epoch of the tier long (epoch_windows: a cold tier's read rate moves within it)
        lines += [f"Windows an epoch of the tier long at the predicted rate, for every contender of the row "
                  f"({', '.join(long)}): a tier read cold moves within its epoch.", ""]
    lines += tiered_lines(tiered_rows) if tiered_rows else []
    if "shuffled" in rows and not failed(rows["shuffled"]):
        lines += ["", "### The shuffle-above-the-cache option, measured as an option", ""]
        lines += option_lines(rows["shuffled"])
    lines += [f"- **{r['pipeline']}**: failed — {r['failed']}" for r in rows.values() if failed(r)]
    lines += ["", f"The section wrote {_gb(section['bytes_written'])} in all (this process's write_bytes: the "
                  f"evaluation records, every fill of a tier, the plan's probes of the directory); "
                  f"{_gb(section['bytes_removed'])} were left on disk at its end and removed.", ""]
    return lines
