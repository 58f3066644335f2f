"""naive / heuristic / AUTOTUNE / plumbkit on the three pipelines of the optimizer issue, in one
process and interleaved; prints throughput ratios and the prediction error.

    python benchmarks/compare.py --seconds 3 --rounds 3 --out /tmp/compare

(The full suite, with stepping, cache and overhead figures, is ``plumbkit bench``.)
"""

import sys

from plumbkit.bench import suite as bench

PIPELINES = "image (cacheable),image + random flip,text"

if __name__ == "__main__":
    argv = sys.argv[1:]
    if "--only" not in argv:
        argv += ["--only", PIPELINES]
    sys.exit(bench.main(argv))
