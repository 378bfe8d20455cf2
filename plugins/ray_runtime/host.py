"""What this host offers a local Ray besides CPUs (framework.machine): free memory and GPUs."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from framework.machine import CGROUP


def memory_available_bytes() -> int:
    """Memory that can be had now without swapping: MemAvailable, capped by a cgroup's limit."""
    available = _meminfo_available()
    try:
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
    """NVIDIA GPUs this process may use (CUDA_VISIBLE_DEVICES, else `nvidia-smi -L`); loads no CUDA."""
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
