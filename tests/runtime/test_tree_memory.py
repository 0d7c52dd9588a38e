"""Memory of a process tree: RSS summed per process counts shared pages once per process, PSS counts them once."""

from __future__ import annotations

import subprocess
import sys

from eagle3lab.runtime import procwatch

# A parent that maps a 64 MiB file-backed region read-only and forks: both processes map the same pages, as TP
# workers map the same safetensors files.
SHARED = """
import mmap, os, tempfile, time
f = tempfile.TemporaryFile(); f.truncate(64 << 20)
m = mmap.mmap(f.fileno(), 64 << 20, prot=mmap.PROT_READ)
sum(m[i] for i in range(0, 64 << 20, 4096))  # touch every page
pid = os.fork()
sum(m[i] for i in range(0, 64 << 20, 4096))
os.write(1, b"ready\\n")  # each process, once its pages are touched (one write: the two lines cannot interleave)
time.sleep(600)  # killed by the test
"""


def test_shared_mapped_pages_count_once_in_pss_and_twice_in_rss():
    proc = subprocess.Popen([sys.executable, "-c", SHARED], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert [proc.stdout.readline().strip() for _ in range(2)] == ["ready", "ready"]  # parent and child
        memory = procwatch.tree_memory(proc.pid)
    finally:
        procwatch.kill_tree(proc.pid)
        proc.wait()
    mapped = 64 << 20
    assert len(memory.per_process) == 2
    assert all(p["rss"] >= mapped for p in memory.per_process.values()), memory.per_process
    assert memory.rss >= 2 * mapped and memory.pss < memory.rss - mapped // 2, (memory.rss, memory.pss)
