"""Is a read after the guest evicted its page cache a disk read on this VM? Write a file, fsync,
evict (posix_fadvise DONTNEED, as the bench does), read it; repeat the evict+read."""
import os, sys, time
path = os.path.expanduser(sys.argv[1] if len(sys.argv) > 1 else "~/.cache/plumbkit/host_cache_probe.bin")
size = int(float(sys.argv[2]) if len(sys.argv) > 2 else 2e9)
os.makedirs(os.path.dirname(path), exist_ok=True)
block = os.urandom(8 << 20)
t = time.perf_counter()
with open(path, "wb") as f:
    for _ in range(size // len(block)):
        f.write(block)
    f.flush(); os.fsync(f.fileno())
print(f"write {size/1e9:.1f} GB: {size/1e6/(time.perf_counter()-t):.0f} MB/s")
def evict():
    fd = os.open(path, os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)
for i in range(4):
    evict()
    t = time.perf_counter(); n = 0
    with open(path, "rb", buffering=0) as f:
        while (b := f.read(8 << 20)):
            n += len(b)
    print(f"read {i+1} after evicting: {n/1e6/(time.perf_counter()-t):.0f} MB/s")
os.remove(path)
