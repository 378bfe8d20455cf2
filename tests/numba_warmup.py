"""The numba kernels of Gomoku and the search, compiled once before the test processes start where
their cache (`__pycache__` beside each source) is cold, as on a fresh clone. Unwarmed, every process
that reaches a kernel before another has cached it compiles it too: the two test processes, their
zygotes, the runs they fork and Ray's workers, ~25 s of CPU each in the suite's first minutes.

    python -m tests.numba_warmup   (compiles what is cold; says what it did)
    python -m tests.numba_warmup --opponents   (plays the evaluation opponents a few moves each)
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
#: A few moves of each kind of run the tests make, together reaching the search's kernels, two at a
#: time in two stages: PUCT on two threads (the parallel kernels) beside the evaluation opponents
#: (kernels no search calls); then, with the kernels they share loaded, Gumbel roots on one thread
#: (the serial kernels) that finish games and train on them, beside the pipelined search of ray_async.
TINY = [
    "experiment=gomoku_6x6",
    "agent.parallel_games=8",
    "search.num_simulations=8",
    "eval.episodes=1",
    "eval.every_steps=0",
    "checkpoint.every_steps=0",
    "tracking=none",
    "env.eval_opponents=[random]",
    "objective.metric=eval/random/score",
]
RUNS = {
    "puct": [*TINY, "total_steps=48", "threads=2", "agent.min_replay=100000"],
    "gumbel": [
        *TINY,
        "total_steps=192",
        "threads=1",
        "search.root=gumbel",
        "agent.min_replay=16",
        "agent.train_every=16",
        "agent.updates_per_phase=1",
        "agent.batch_size=8",
    ],
    "ray_async": [
        *TINY,
        "total_steps=48",
        "search=ray_async",
        "search.inference_num_cpus=0.5",
        "agent.workers=0",
        "agent.min_replay=100000",
    ],
}
#: The opponents played a few moves each.
OPPONENTS = ("heuristic", "mcts8", "alphabeta2")
STAGES = (("puct", "opponents"), ("gumbel", "ray_async"))
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


def _start(command: list[str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", *command],
        cwd=cwd,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _ended(name: str, process: subprocess.Popen[str], deadline: float) -> str:
    """Nothing once `process` has ended well (it is killed at `deadline`), else what went wrong."""
    try:
        out, _ = process.communicate(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        process.kill()
        out, _ = process.communicate()
    return "" if process.returncode == 0 else f"{name} (exit {process.returncode}): {out.strip()[-300:]}"


def play_opponents() -> None:
    """A few moves of each evaluation opponent (their kernels compiled or loaded)."""
    from framework_plugins.gomoku.opponents import make_opponent
    from framework_plugins.gomoku.rules import GameState, Gomoku

    game = Gomoku(6, 4)
    for name in OPPONENTS:
        state, opponent = GameState(game), make_opponent(name, game, seed=0)
        for _ in range(4):
            state.play(opponent.act(state))


def warm_up() -> str:
    """Compile the cold kernels, stage by stage; what was done, in a line."""
    todo = cold(kernel_sources())
    if not todo:
        return ""
    started = time.monotonic()
    deadline = started + TIMEOUT_S
    work = Path(tempfile.mkdtemp(prefix="numba-warmup-"))
    failed = []
    try:
        for stage in STAGES:
            started_here = {
                name: _start(["tests.numba_warmup", "--opponents"], ROOT)
                if name == "opponents"
                else _start(["framework", *RUNS[name], f"hydra.run.dir={work / name}"], work)
                for name in stage
            }
            failed += [_ended(name, process, deadline) for name, process in started_here.items()]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    took = time.monotonic() - started
    said = f"numba: the kernels of {len(todo)} cold source(s) compiled for the test processes in {took:.0f} s"
    if any(failed):  # the tests compile what is left as they go, and say what broke
        said += "; a warm-up failed: " + "; ".join(f for f in failed if f)
    return said


if __name__ == "__main__":
    if sys.argv[1:] == ["--opponents"]:
        play_opponents()
    else:
        print(warm_up() or "numba: every kernel's cache is warm")
