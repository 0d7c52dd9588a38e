"""Who used the CPU while a benchmark point ran: the server, this client, or something else.

On a small shared machine a throughput number means little without this. The whole-machine busy share alone is
no help: sglang's scheduler polls, so the server keeps the cores busy even when idle. What tells a clean
measurement from a disturbed one is the share taken by processes that are neither the server nor the client.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import psutil


@dataclass(frozen=True)
class CpuSnapshot:
    machine: Any  # psutil.cpu_times() of all cores together
    server_s: float | None  # user+system seconds of the server's process tree; None if it is not on this host
    client_s: float  # user+system seconds of this process


@dataclass(frozen=True)
class CpuShares:
    """Shares of all cores' time over an interval (0..1). ``other`` is what neither server nor client used."""

    machine_busy: float
    server: float | None
    client: float
    other: float | None


def server_processes(base_url: str) -> list[psutil.Process]:
    """The process listening on the URL's port on this host, and all its descendants (scheduler, ...)."""
    parts = urlsplit(base_url)
    if parts.hostname not in ("127.0.0.1", "localhost", "::1", "0.0.0.0") or parts.port is None:
        return []
    try:
        for conn in psutil.net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == parts.port and conn.pid:
                root = psutil.Process(conn.pid)
                return [root, *root.children(recursive=True)]
    except (psutil.Error, OSError):
        pass
    return []


def _busy_seconds(procs: list[psutil.Process]) -> float | None:
    if not procs:
        return None
    total = 0.0
    for proc in procs:
        try:
            times = proc.cpu_times()
            total += times.user + times.system
        except psutil.Error:
            pass
    return total


def snapshot(server: list[psutil.Process]) -> CpuSnapshot:
    return CpuSnapshot(psutil.cpu_times(), _busy_seconds(server), _busy_seconds([psutil.Process()]) or 0.0)


def busy_fraction(before: Any, after: Any) -> float | None:
    """Share of all cores' time that was not idle between two ``psutil.cpu_times()`` snapshots."""
    total = sum(after) - sum(before)
    idle = (after.idle + getattr(after, "iowait", 0.0)) - (before.idle + getattr(before, "iowait", 0.0))
    return None if total <= 0 else round(1.0 - idle / total, 3)


def shares(before: CpuSnapshot, after: CpuSnapshot) -> CpuShares | None:
    """Split the interval's CPU time between server, client and everything else."""
    total = sum(after.machine) - sum(before.machine)
    busy = busy_fraction(before.machine, after.machine)
    if total <= 0 or busy is None:
        return None
    client = (after.client_s - before.client_s) / total
    server = None
    other = None
    if before.server_s is not None and after.server_s is not None:
        server = (after.server_s - before.server_s) / total
        other = max(0.0, busy - server - client)
    return CpuShares(busy, None if server is None else round(server, 3), round(client, 3),
                     None if other is None else round(other, 3))
