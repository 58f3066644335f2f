"""``tf.data.Options`` plumbkit builds: run exactly as written, keep ops on one thread, AUTOTUNE."""

from __future__ import annotations

import tensorflow as tf


def sequential_options(intra_op: int | None = 1) -> tf.data.Options:
    """Options that make a pipeline run exactly as written: no rewrites, no autotuning."""
    options = tf.data.Options()
    options.experimental_optimization.apply_default_optimizations = False
    options.experimental_optimization.map_parallelization = False
    options.experimental_optimization.inject_prefetch = False
    options.autotune.enabled = False
    if intra_op is not None:
        options.threading.max_intra_op_parallelism = intra_op
    return options


def single_thread_ops_options() -> tf.data.Options:
    """Keep each op on one thread (no intra-op fan-out) so CPU is attributable to operators."""
    options = tf.data.Options()
    options.threading.max_intra_op_parallelism = 1
    return options


def autotune_options(cores: int | None = None) -> tf.data.Options:
    """Autotuning on, with its CPU budget set to ``cores`` (the tf.data papers' AUTOTUNE baseline)."""
    options = tf.data.Options()
    options.autotune.enabled = True
    if cores:
        options.autotune.cpu_budget = int(cores)
    return options


def observed_options(initial_parallelism: int) -> tf.data.Options:
    """Autotuning's runtime model on (so it can be sampled) without what autotuning would add:
    no injected prefetch, AUTOTUNE-valued parallelism starting at ``initial_parallelism``."""
    options = tf.data.Options()
    options.autotune.enabled = True
    options.experimental_optimization.inject_prefetch = False
    options.autotune.initial_parallelism = max(1, initial_parallelism)
    return options
