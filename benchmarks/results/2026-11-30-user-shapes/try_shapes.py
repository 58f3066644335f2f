"""The loop the ``shapes_*.py`` scripts share: each shape optimized under the brief protocol, as a
new user would; one line with what the plan did (and the script's own check), or the exception
and its plumbkit frames. ``FULL=1`` prints the whole plan."""
import os
import sys
import time
import traceback

import plumbkit
from plumbkit.engine.compare import BRIEF


def write_records(directory: str, name: str, n_files: int, per_file: int, record) -> list[str]:
    """TFRecord files ``name.format(f=file, n=n_files)`` under ``directory``, each holding
    ``record(file, i)`` (bytes) for ``i`` below ``per_file``; their paths."""
    import tensorflow as tf
    paths = []
    for f in range(n_files):
        path = os.path.join(directory, name.format(f=f, n=n_files))
        with tf.io.TFRecordWriter(path) as w:
            for i in range(per_file):
                w.write(record(f, i))
        paths.append(path)
    return paths


def run(cases, check=None) -> None:
    """``cases``: zero-argument pipeline factories (named on the command line to run only them).
    ``check(make, plan)``: a flag to print after the plan's line ("" when all is well), read
    before the plan too where it needs yours first (it is given ``make``)."""
    only = sys.argv[1:]
    for make in cases:
        if only and make.__name__ not in only:
            continue
        t0 = time.time()
        try:
            plan = plumbkit.optimize(make, seconds=1.5, protocol=BRIEF)
            flag = check(make, plan) if check else ""
            changes = [c.what + ":" + c.where for c in plan.proposed_changes]
            print(f"OK   {make.__name__:20s} {time.time() - t0:5.1f}s pred={plan.prediction.throughput:,.0f} "
                  f"bind={plan.prediction.binding[:40]!r} changes={changes}{flag}", flush=True)
            lines = str(plan).splitlines()
            print("      ", "\n       ".join(lines[:40]) if os.environ.get("FULL") else lines[0][:220], flush=True)
        except Exception as e:  # noqa: BLE001 - a sweep reports every failure and goes on
            print(f"FAIL {make.__name__:20s} {time.time() - t0:5.1f}s {type(e).__name__}: {str(e)[:400]}", flush=True)
            for fr in traceback.extract_tb(e.__traceback__):
                if "plumbkit" in fr.filename:
                    print("   ", fr.filename.split("plumbkit/")[-1], fr.lineno, fr.name)
