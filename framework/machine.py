"""What this machine can give a run: CPUs, free memory, GPUs. Cheap, and without torch or Ray.

Each figure honours the limits a container puts on the process (CPU affinity, cgroup quotas), as
Ray's own detection does, so that a run in a 2-CPU container on a 64-core host sees 2.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
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


def memory_available_bytes() -> int:
    """Memory that can be had now without swapping: MemAvailable, capped by a cgroup's limit."""
    available = _meminfo_available()
    try:  # cgroup v2: what the limit leaves
        limit = (CGROUP / "memory.max").read_text().strip()
        if limit == "max":
            return available
        used = int((CGROUP / "memory.current").read_text())
    except (OSError, ValueError):  # no cgroup v2 memory limit here
        return available
    return min(available, max(0, int(limit) - used))


def _meminfo_available() -> int:
    try:
        lines = Path("/proc/meminfo").read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    # Not Linux: free physical pages (no page cache counted, so this errs low).
    return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))


def gpus() -> int:
    """NVIDIA GPUs this process may use: CUDA_VISIBLE_DEVICES where set, else `nvidia-smi -L`
    (0 without it). No CUDA library is loaded, so a run that never uses a GPU pays nothing."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        ids = [d for d in visible.split(",") if d.strip()]
        # CUDA stops at the first invalid id: "-1" (a common way to hide every GPU) hides the rest.
        return next((i for i, d in enumerate(ids) if d.strip().startswith("-")), len(ids))
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return 0
    try:
        listed = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(line.startswith("GPU ") for line in listed.stdout.splitlines())


def gib(n_bytes: float) -> str:
    """`21.5 GiB`: a memory figure for a message."""
    return f"{n_bytes / 2**30:.1f} GiB"


def short_openmp_spin(env: MutableMapping[str, str] | None = None) -> None:
    """OpenMP's workers (libgomp's: torch's, and numba's, which shares it) wait 10,000 turns for
    their next region, not GOMP's default 300,000, then sleep (unless OMP_WAIT_POLICY or
    GOMP_SPINCOUNT says otherwise); before torch is imported, whose libgomp reads it once.

    A run's parts take turns on its threads: the network (torch's OpenMP threads, or ONNX Runtime's
    own), then a search's tree kernels (numba's). Workers left spinning after their part's turn take
    the cores from the next part: the 9x9 preset's self-play on 2 threads made 105-123 moves/s so,
    against 269-286 with 10,000 turns. Fewer turns make a worker sleep between the two regions of
    a tree's turn: the tree alone on 2 threads went from 1.76x one thread's rate to 1.03x with
    1,000, and asleep at once (OMP_WAIT_POLICY=PASSIVE) torch's own 2-thread forward lost a third.
    `env`: the environment to set it in (this process's by default).
    """
    env = os.environ if env is None else env
    if "OMP_WAIT_POLICY" not in env and "GOMP_SPINCOUNT" not in env:
        env["GOMP_SPINCOUNT"] = "10000"
