"""Memory of a process tree: RSS summed per process counts shared pages once per process, PSS counts them once."""

from __future__ import annotations

import subprocess
import sys
import time

from eagle3lab.runtime import procwatch

# A parent that maps a 64 MiB file-backed region read-only and forks: both processes map the same pages, as TP
# workers map the same safetensors files.
SHARED = """
import mmap, os, tempfile, time
f = tempfile.TemporaryFile(); f.truncate(64 << 20)
m = mmap.mmap(f.fileno(), 64 << 20, prot=mmap.PROT_READ)
sum(m[i] for i in range(0, 64 << 20, 4096))  # touch every page
r, w = os.pipe()
pid = os.fork()
sum(m[i] for i in range(0, 64 << 20, 4096))
if pid == 0:
    os.write(w, b"x")  # the child has touched every page too
else:
    os.read(r, 1)
    print("ready", flush=True)  # the parent alone prints: two writers on one pipe interleave ("readyready")
time.sleep(20)
"""


def test_shared_mapped_pages_count_once_in_pss_and_twice_in_rss():
    proc = subprocess.Popen([sys.executable, "-c", SHARED], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(0.5)
        memory = procwatch.tree_memory(proc.pid)
    finally:
        procwatch.kill_tree(proc.pid)
        proc.wait()
    mapped = 64 << 20
    assert len(memory.per_process) == 2
    assert all(p["rss"] >= mapped for p in memory.per_process.values()), memory.per_process
    assert memory.rss >= 2 * mapped and memory.pss < memory.rss - mapped // 2, (memory.rss, memory.pss)
