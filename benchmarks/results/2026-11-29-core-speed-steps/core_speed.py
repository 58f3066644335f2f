"""Each core of this VM timed on a fixed numpy matmul loop, pinned, both cores at once:
the CPU per 48x48 matmul, medians per half second. Run: python core_speed.py 0 & python core_speed.py 1"""
import time, numpy as np, sys, os
os.sched_setaffinity(0, {int(sys.argv[1])})
m = np.full((48,48), 1.0/48, dtype=np.float32)
out=[]
t0=time.monotonic()
while time.monotonic()-t0 < 20:
    c0=time.process_time()
    for _ in range(2000): m2 = m @ m
    out.append((round(time.monotonic()-t0,1), (time.process_time()-c0)/2000*1e6))
# per 0.5 s bucket medians
import collections, statistics
b=collections.defaultdict(list)
for t,x in out: b[int(t*2)].append(x)
print(sys.argv[1], " ".join(f"{statistics.median(v):.1f}" for k,v in sorted(b.items())))
