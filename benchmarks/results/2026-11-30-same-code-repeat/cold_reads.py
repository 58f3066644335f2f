"""Reads of files nobody touched for weeks, each after the guest evicted its page cache (as the
bench does before every round): does a second read still go to the disk? Output: host_cache.log."""
import glob
import os
import time

files = sorted(glob.glob("/opt/pypi-more/files/*"), key=os.path.getsize, reverse=True)[:3]
for path in files:
    for i in range(3):
        fd = os.open(path, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
        t, n = time.perf_counter(), 0
        with open(path, "rb", buffering=0) as f:
            while (b := f.read(8 << 20)):
                n += len(b)
        print(os.path.basename(path)[:40], f"{n / 1e6:.0f} MB read {i + 1}: {n / 1e6 / (time.perf_counter() - t):.0f} MB/s")
