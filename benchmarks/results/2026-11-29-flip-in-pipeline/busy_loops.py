"""Keep the machine's other cores busy while operators are calibrated.

Why: an operator run alone on an idle machine reads more CPU per element than it spends inside a
pipeline that keeps the cores busy, and by how much depends on the operator. Measured on the
2-core Intel VM (``benchmarks/results/2026-11-29-flip-in-pipeline``), idle against beside a busy
loop in another process: a random flip 81-83 µs per element against 48-51, a normalize 68-70
against 51, a box-aware crop 178-182 against 126-139, a 288-unit matmul 709-751 against 702-726.
Inside the random-flip plan, by difference, the flip cost 39-52 µs and the normalize 48. The
CPU a short operator's threads spend between its elements on an idle core is not spent where
every core has work; a uniform scale to the process CPU (``analysis.operational.in_pipeline_scale``)
took it out of every operator alike, the matmul too.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from typing import Iterator

#: A busy loop that ends by itself once its parent is gone (checked every ~10 ms of looping), so
#: a killed plumbkit never leaves one behind.
_BUSY_LOOP = ("import os\n"
              "parent = os.getppid()\n"
              "while os.getppid() == parent:\n"
              "    for _ in range(100_000):\n"
              "        pass\n")


@contextlib.contextmanager
def other_cores_busy(cores: int) -> Iterator[int]:
    """Run ``cores - 1`` busy loops in processes of their own (their CPU is not this process's)
    for the duration of the block; yields how many run. Each is killed when the block ends, by
    an exception or Ctrl-C too."""
    loops: list[subprocess.Popen] = []
    try:
        for _ in range(max(0, cores - 1)):
            loops.append(subprocess.Popen([sys.executable, "-S", "-c", _BUSY_LOOP], stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        yield len(loops)
    finally:
        for loop in loops:
            loop.kill()
        for loop in loops:
            loop.wait()


__all__ = ["other_cores_busy"]
