"""The numba kernels of Gomoku and the search, compiled once before the test processes start where
their cache (`__pycache__` beside each source) is cold, as on a fresh clone. Unwarmed, every process
that reaches a kernel before another has cached it compiles it too: the two test processes, their
zygotes, the runs they fork and Ray's workers, ~25 s of CPU each in the suite's first minutes.

    python -m tests.numba_warmup   (compiles what is cold; says what it did)
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: A few moves of each kind of run the tests make, together reaching the kernels they call: PUCT on
#: two threads (the parallel kernels) evaluated against every kind of opponent, Gumbel roots on one
#: (the serial kernels) that finish games and train on them, and the pipelined search of ray_async.
TINY = [
    "experiment=gomoku_6x6",
    "agent.parallel_games=8",
    "search.num_simulations=8",
    "eval.episodes=1",
    "eval.every_steps=0",
    "checkpoint.every_steps=0",
    "tracking=none",
]
RUNS = {
    "puct": [
        *TINY,
        "total_steps=48",
        "threads=2",
        "agent.min_replay=100000",
        "env.eval_opponents=[random,heuristic,mcts8,alphabeta1]",
        "objective.metric=eval/random/score",
    ],
    "gumbel": [
        *TINY,
        "total_steps=192",
        "threads=1",
        "search.root=gumbel",
        "agent.min_replay=16",
        "agent.train_every=16",
        "agent.updates_per_phase=1",
        "agent.batch_size=8",
        "env.eval_opponents=[random]",
        "objective.metric=eval/random/score",
    ],
    "ray_async": [
        *TINY,
        "total_steps=48",
        "search=ray_async",
        "search.inference_num_cpus=0.5",
        "agent.workers=0",
        "agent.min_replay=100000",
        "env.eval_opponents=[random]",
        "objective.metric=eval/random/score",
    ],
}
TIMEOUT_S = 300.0
#: A cached kernel's decorator. (Kernels made by a call, as plugins/mcts/threads.py makes its
#: parallel and serial twins, are cached under their function's module, which this does not read.)
CACHED_KERNEL = re.compile(r"^@nb\.\w+\(.*cache=True", re.MULTILINE)


def kernel_sources() -> list[Path]:
    """The plugin sources that define cached numba kernels."""
    return sorted(p for p in (ROOT / "plugins").rglob("*.py") if CACHED_KERNEL.search(p.read_text()))


def cold(sources: list[Path]) -> list[Path]:
    """The sources without a cache index at least as new as themselves (numba compiles those)."""
    found = []
    for source in sources:
        indexes = list((source.parent / "__pycache__").glob(f"{source.stem}.*.nbi"))
        if not indexes or min(i.stat().st_mtime for i in indexes) < source.stat().st_mtime:
            found.append(source)
    return found


def _start(args: list[str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "framework", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def warm_up() -> str:
    """Compile the cold kernels in a few tiny runs at once; what was done, in a line."""
    todo = cold(kernel_sources())
    if not todo:
        return ""
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="numba-warmup-"))
    try:
        runs = {name: _start([*args, f"hydra.run.dir={work / name}"], work) for name, args in RUNS.items()}
        failed = []
        for name, run in runs.items():
            try:
                out, _ = run.communicate(timeout=max(1.0, TIMEOUT_S - (time.monotonic() - started)))
            except subprocess.TimeoutExpired:
                run.kill()
                out, _ = run.communicate()
            if run.returncode != 0:
                failed.append(f"{name} (exit {run.returncode}): {out.strip().splitlines()[-1:]}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    took = time.monotonic() - started
    said = f"numba: the kernels of {len(todo)} cold source(s) compiled for the test processes in {took:.0f} s"
    if failed:  # the tests compile what is left as they go, and say what broke
        said += "; a warm-up run failed: " + "; ".join(failed)
    return said


if __name__ == "__main__":
    print(warm_up() or "numba: every kernel's cache is warm")
