"""The numba kernels of Gomoku and the search, compiled once where their cache (`__pycache__`
beside each source) is cold, as on a fresh clone, beside the tests that reach no kernel (which run
first). Unwarmed, every process that reaches a kernel before another has cached it compiles it too:
the two test processes, their zygotes, the runs they fork and Ray's workers, ~25 s of CPU each in
the suite's first minutes.

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
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: A few moves of each kind of run the tests make, together reaching the search's kernels, in two
#: stages: PUCT on two threads (the parallel kernels) beside the evaluation opponents (kernels no
#: search calls); then, with the kernels they share cached, Gumbel roots on one thread (the serial
#: kernels) that finish games and train on them. (The pipelined search of ray_async adds four small
#: kernels, compiled by its first run: a Ray started here to reach them took more CPU than they do.)
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
}
#: The opponents played a few moves each.
OPPONENTS = ("heuristic", "mcts8", "alphabeta2")
STAGES = (("puct", "opponents"), ("gumbel",))
TIMEOUT_S = 300.0
#: A cached kernel's decorator. (Kernels made by a call, as plugins/mcts/threads.py makes its
#: parallel and serial twins, are cached under their function's module, which this does not read.)
CACHED_KERNEL = re.compile(r"^@nb\.\w+\(.*cache=True", re.MULTILINE)


#: The kernel sources no warm-up run reaches (the pipelined search's leaves, above).
LEFT_TO_TESTS = (ROOT / "plugins" / "mcts" / "leaves.py",)


def kernel_sources() -> list[Path]:
    """The plugin sources that define cached numba kernels the warm-up reaches."""
    return sorted(
        p
        for p in (ROOT / "plugins").rglob("*.py")
        if p not in LEFT_TO_TESTS and CACHED_KERNEL.search(p.read_text())
    )


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


def _ended(name: str, process: subprocess.Popen[str], deadline: float, stop: threading.Event) -> str:
    """Nothing once `process` has ended well (it is killed at `deadline` or `stop`), else what went wrong."""
    while True:
        try:  # read as it goes (a full pipe would stop it); a retried communicate loses nothing
            out, _ = process.communicate(timeout=0.5)
            break
        except subprocess.TimeoutExpired:
            if stop.is_set() or time.monotonic() >= deadline:
                process.kill()
                out, _ = process.communicate()
                break
    if stop.is_set():
        return ""
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


def warm_up(stop: threading.Event | None = None) -> str:
    """Compile the cold kernels, stage by stage (cut short at `stop`); what was done, in a line."""
    stop = stop or threading.Event()
    todo = cold(kernel_sources())
    if not todo:
        return ""
    started = time.monotonic()
    deadline = started + TIMEOUT_S
    work = Path(tempfile.mkdtemp(prefix="numba-warmup-"))
    failed = []
    try:
        for stage in STAGES:
            if stop.is_set():
                break
            started_here = {
                name: _start(["tests.numba_warmup", "--opponents"], ROOT)
                if name == "opponents"
                else _start(["framework", *RUNS[name], f"hydra.run.dir={work / name}"], work)
                for name in stage
            }
            # Each process is waited for (and killed at the deadline), whatever another said.
            failed += [_ended(name, process, deadline, stop) for name, process in started_here.items()]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    took = time.monotonic() - started
    said = f"numba: the kernels of {len(todo)} cold source(s) compiled for the test processes in {took:.0f} s"
    if stop.is_set():
        said += " (cut short: the tests had ended)"
    if any(failed):  # the tests compile what is left as they go, and say what broke
        said += "; a warm-up failed: " + "; ".join(f for f in failed if f)
    return said


class Background:
    """The warm-up in a thread of the process that starts the tests; the file `done` (named by
    DONE_ENV to the test processes it starts) holds its line once it has ended."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="numba-warmup-done-"))
        self.done = self.folder / "done"
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="numba-warmup", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            said = warm_up(self.stop)
        except Exception as e:  # the tests compile what is left as they go
            said = f"numba: the warm-up failed: {type(e).__name__}: {e}"
        partial = self.done.with_suffix(".part")
        partial.write_text(said)
        partial.replace(self.done)

    def end(self) -> str:
        """Its line, once it has ended (cut short if it still runs); its folder removed."""
        self.stop.set()
        self.thread.join(TIMEOUT_S)
        said = self.done.read_text() if self.done.is_file() else ""
        shutil.rmtree(self.folder, ignore_errors=True)
        return said


#: The variable naming a running warm-up's `done` file to the test processes.
DONE_ENV = "FRAMEWORK_TESTS_NUMBA_WARMUP"


def wait_for(done: Path) -> None:
    """Until the warm-up whose `done` file this is has ended (at most its own time limit and a minute)."""
    deadline = time.monotonic() + TIMEOUT_S + 60
    while not done.is_file() and time.monotonic() < deadline:
        time.sleep(0.2)


if __name__ == "__main__":
    if sys.argv[1:] == ["--opponents"]:
        play_opponents()
    else:
        print(warm_up() or "numba: every kernel's cache is warm")
