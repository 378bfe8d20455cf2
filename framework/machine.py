"""The CPUs this machine gives a run, cheaply and without torch or Ray; within a container's limits
(affinity, cgroup quotas), as Ray detects them: a 2-CPU container on 64 cores sees 2."""

from __future__ import annotations

import math
import os
from collections.abc import MutableMapping
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")


def cpus() -> int:
    """CPUs this process may run on: its affinity, capped by a cgroup CPU quota."""
    try:
        count = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        count = os.cpu_count() or 1
    quota = _cgroup_cpu_quota()
    return max(1, min(count, math.ceil(quota)) if quota else count)


def _cgroup_cpu_quota() -> float | None:
    """CPUs a cgroup's quota allows (v2 cpu.max, v1 cfs quota/period), or None without one."""
    v2 = CGROUP / "cpu.max"
    if v2.is_file():
        try:
            quota, period = v2.read_text().split()[:2]
            return None if quota == "max" else int(quota) / int(period)
        except (OSError, ValueError):
            return None
    try:
        quota_us = int((CGROUP / "cpu" / "cpu.cfs_quota_us").read_text())
        period_us = int((CGROUP / "cpu" / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota_us / period_us if quota_us > 0 and period_us > 0 else None


def short_openmp_spin(env: MutableMapping[str, str] | None = None) -> None:
    """Make libgomp workers (torch's, numba's) spin 10,000 turns, not 300,000, before sleeping, unless
    OMP_WAIT_POLICY or GOMP_SPINCOUNT is set; call before torch is imported. `env`: default os.environ.

    The network and a search's tree kernels take turns on the threads; spinning workers starve the next
    (9x9 self-play on 2 threads: 105-123 moves/s, 269-286 with 10,000). Fewer turns cost the tree (1,000:
    1.76x one thread's rate fell to 1.03x), and PASSIVE cost torch's 2-thread forward a third."""
    env = os.environ if env is None else env
    if "OMP_WAIT_POLICY" not in env and "GOMP_SPINCOUNT" not in env:
        env["GOMP_SPINCOUNT"] = "10000"
