"""Replay buffers on Atari-shaped data: ours beside SB3's memory-optimised buffer and a naive one.

84×84 uint8 frames stacked 4 deep, episodes of 100–1,000 steps. Three buffers, one after
another (each freed before the next is built, as SB3's takes ~2.8 GB and the naive one ~5.6 GB
at 100k transitions):

- ours: MemoryEfficientReplayBuffer, fed one frame per step (on_reset, insert) as the DQN agent does;
- SB3: stable_baselines3.common.buffers.ReplayBuffer(optimize_memory_usage=True), n_envs=1,
  fed the stacked (1, 4, 84, 84) observations SB3's VecFrameStack produces. SB3 refuses
  optimize_memory_usage together with its default handle_timeout_termination=True, so that is off;
- naive: full stacked observation and next observation arrays per transition.

Bytes per stored transition are the nbytes of every array a buffer holds over the transitions it
can sample, after `capacity` inserts and after 2×. Inserts/s are medians over ten chunks of
the first fill and of the second (wrapped) pass; batches/s are medians of several repeats,
each batch handed over as torch tensors (SB3 returns tensors; ours and naive are wrapped with
torch.from_numpy, which does not copy). Everything runs on one thread, timed by default with
this process's CPU time (page faults included): on a shared machine, wall time would charge
other processes' load to whichever buffer happened to be running; `--clock wall` uses wall time.

    python benchmarks/buffers.py [--capacity 100000] [--repeats 5] [--clock cpu|wall] [--quick]
"""

from __future__ import annotations

import argparse
import gc
import itertools
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

FRAME = (84, 84)
STACK = 4
ACTIONS = 6
POOL = 512  # distinct frames (and stacks) cycled through, so copies do not all come from cache
CHUNKS = 10
BATCHES = (32, 256)
KB = 1000
CLOCKS: dict[str, Callable[[], float]] = {"cpu": time.process_time, "wall": time.perf_counter}


class Feed:
    """The same data for every buffer: a frame pool, a stack pool and episode boundaries."""

    def __init__(self, steps: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.frames = [rng.integers(0, 256, FRAME, dtype=np.uint8) for _ in range(POOL)]
        self.stacks = [rng.integers(0, 256, (1, STACK, *FRAME), dtype=np.uint8) for _ in range(POOL)]
        ends = np.zeros(steps, dtype=bool)
        t = -1
        while t < steps:
            t += int(rng.integers(100, 1001))
            ends[t if t < steps else steps - 1] = True
        #: Step t ends its episode / starts a new one (python lists: cheap to index in a loop).
        self.ends = ends.tolist()
        self.starts = [True, *self.ends[:-1]]


class Ours:
    name = "ours (MemoryEfficientReplayBuffer)"

    def __init__(self, capacity: int, feed: Feed) -> None:
        from framework_plugins.buffers.memory_efficient import MemoryEfficientReplayBuffer

        self.buffer = MemoryEfficientReplayBuffer(capacity=capacity, frame_history_len=STACK, seed=0)
        self.feed = feed

    def fill(self, start: int, stop: int) -> None:
        on_reset, insert = self.buffer.on_reset, self.buffer.insert
        frames, starts, ends = self.feed.frames, self.feed.starts, self.feed.ends
        for t in range(start, stop):
            if starts[t]:
                on_reset(frames[(t * 7) % POOL])
            insert(t % ACTIONS, 1.0, frames[t % POOL], ends[t])

    def nbytes(self) -> int:
        return self.buffer.nbytes

    def __len__(self) -> int:
        return len(self.buffer)

    def sample(self, batch_size: int) -> Any:
        import torch

        return {key: torch.from_numpy(value) for key, value in self.buffer.sample(batch_size).items()}


class SB3:
    name = "SB3 ReplayBuffer(optimize_memory_usage)"

    def __init__(self, capacity: int, feed: Feed) -> None:
        import gymnasium as gym
        from stable_baselines3.common.buffers import ReplayBuffer

        self.buffer = ReplayBuffer(
            capacity,
            gym.spaces.Box(0, 255, (STACK, *FRAME), np.uint8),
            gym.spaces.Discrete(ACTIONS),
            device="cpu",
            n_envs=1,
            optimize_memory_usage=True,
            handle_timeout_termination=False,
        )
        self.feed = feed
        self.actions = [np.array([[a]]) for a in range(ACTIONS)]
        self.dones = {flag: np.array([flag]) for flag in (False, True)}
        np.random.seed(0)  # SB3 samples with numpy's global generator

    def fill(self, start: int, stop: int) -> None:
        add, stacks, ends = self.buffer.add, self.feed.stacks, self.feed.ends
        actions, dones, reward, infos = self.actions, self.dones, np.array([1.0]), [{}]
        for t in range(start, stop):
            add(stacks[t % POOL], stacks[(t + 1) % POOL], actions[t % ACTIONS], reward, dones[ends[t]], infos)

    def nbytes(self) -> int:
        return sum(a.nbytes for a in vars(self.buffer).values() if isinstance(a, np.ndarray))

    def __len__(self) -> int:
        return int(self.buffer.size())

    def sample(self, batch_size: int) -> Any:
        return self.buffer.sample(batch_size)


class Naive:
    """Full stacked observation and next observation stored per transition; fancy-indexed samples."""

    name = "naive (stacked obs + next_obs)"

    def __init__(self, capacity: int, feed: Feed) -> None:
        self.capacity, self.feed, self.size, self.pos = capacity, feed, 0, 0
        self.rng = np.random.default_rng(0)
        self.arrays = {
            "observations": np.zeros((capacity, STACK, *FRAME), np.uint8),
            "actions": np.zeros(capacity, np.int64),
            "rewards": np.zeros(capacity, np.float32),
            "next_observations": np.zeros((capacity, STACK, *FRAME), np.uint8),
            "dones": np.zeros(capacity, np.bool_),
        }

    def add(self, obs: np.ndarray, action: int, reward: float, next_obs: np.ndarray, done: bool) -> None:
        for key, value in zip(self.arrays, (obs, action, reward, next_obs, done), strict=True):
            self.arrays[key][self.pos] = value
        self.pos = (self.pos + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def fill(self, start: int, stop: int) -> None:
        add, stacks, ends = self.add, self.feed.stacks, self.feed.ends
        for t in range(start, stop):
            add(stacks[t % POOL][0], t % ACTIONS, 1.0, stacks[(t + 1) % POOL][0], ends[t])

    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays.values())

    def __len__(self) -> int:
        return self.size

    def sample(self, batch_size: int) -> Any:
        import torch

        rows = self.rng.integers(0, self.size, size=batch_size)
        return {key: torch.from_numpy(a[rows]) for key, a in self.arrays.items()}


def chunk_rates(
    fill: Callable[[int, int], None], start: int, steps: int, clock: Callable[[], float]
) -> list[float]:
    """Inserts per second of each of CHUNKS consecutive chunks of `steps` inserts from `start`."""
    bounds = np.linspace(start, start + steps, CHUNKS + 1).astype(int).tolist()
    rates = []
    for lo, hi in itertools.pairwise(bounds):
        t0 = clock()
        fill(lo, hi)
        rates.append((hi - lo) / (clock() - t0))
    return rates


def batch_rate(
    sample: Callable[[int], Any], batch_size: int, repeats: int, clock: Callable[[], float]
) -> float:
    """Median over `repeats` of sampled batches per second (each repeat ~0.2 s or at least 3 batches)."""
    sample(batch_size)  # first touch of the output arrays is not a steady-state cost
    t0 = clock()
    sample(batch_size)
    per_repeat = max(3, int(0.2 / max(clock() - t0, 1e-6)))
    rates = []
    for _ in range(repeats):
        t0 = clock()
        for _ in range(per_repeat):
            sample(batch_size)
        rates.append(per_repeat / (clock() - t0))
    return statistics.median(rates)


def measure(
    kind: type, capacity: int, feed: Feed, repeats: int, clock: Callable[[], float]
) -> dict[str, float]:
    side = kind(capacity, feed)
    print(f"  {side.name}: filling", flush=True)
    first = chunk_rates(side.fill, 0, capacity, clock)
    row = {"kb_fill": side.nbytes() / len(side) / KB}
    steady = chunk_rates(side.fill, capacity, capacity, clock)
    row.update(
        kb_wrapped=side.nbytes() / len(side) / KB,
        inserts_fill=statistics.median(first),
        inserts_steady=statistics.median(steady),
    )
    print(f"  {side.name}: sampling", flush=True)
    for batch_size in BATCHES:
        row[f"batches_{batch_size}"] = batch_rate(side.sample, batch_size, repeats, clock)
    del side
    gc.collect()
    return row


COLUMNS = [
    ("kb_fill", "kB/transition at fill", "{:.1f}"),
    ("kb_wrapped", "kB/transition after 2x", "{:.1f}"),
    ("inserts_fill", "inserts/s first fill", "{:,.0f}"),
    ("inserts_steady", "inserts/s wrapped", "{:,.0f}"),
    *((f"batches_{b}", f"batches/s @{b}", "{:,.0f}") for b in BATCHES),
]


def print_table(rows: dict[str, dict[str, float]], ours: str, reference: str) -> None:
    header = ["buffer", *(title for _, title, _ in COLUMNS)]
    lines = [[name, *(fmt.format(row[key]) for key, _, fmt in COLUMNS)] for name, row in rows.items()]
    ratio = [f"{ours.split()[0]} / {reference.split()[0]}"]
    ratio += [f"{rows[ours][key] / rows[reference][key]:.2f}x" for key, _, _ in COLUMNS]
    lines.append(ratio)
    widths = [max(len(str(line[i])) for line in [header, *lines]) for i in range(len(header))]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for line in lines:
        cells = [line[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(line[1:], widths[1:], strict=True))]
        print("| " + " | ".join(cells) + " |")


def print_goals(ours: dict[str, float], sb3: dict[str, float]) -> None:
    goals = [
        ("ours <= 7.3 kB per transition at all times", max(ours["kb_fill"], ours["kb_wrapped"]) <= 7.3),
        *(
            (f"ours samples >= 2x SB3 at batch {b}", ours[f"batches_{b}"] >= 2 * sb3[f"batches_{b}"])
            for b in BATCHES
        ),
        ("ours inserts >= 200k/s once wrapped", ours["inserts_steady"] >= 200_000),
    ]
    for text, met in goals:
        print(f"  [{'met' if met else 'MISSED'}] {text}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--capacity", type=int, default=100_000, help="transitions each buffer holds")
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats per sampling measurement")
    parser.add_argument("--clock", choices=list(CLOCKS), default="cpu", help="time with CPU or wall time")
    parser.add_argument("--quick", action="store_true", help="a small smoke run (capacity 5,000, 3 repeats)")
    args = parser.parse_args()
    capacity, repeats = (5_000, 3) if args.quick else (args.capacity, args.repeats)

    import torch

    torch.set_num_threads(1)
    feed = Feed(2 * capacity, seed=0)
    episodes = sum(feed.ends)
    print(f"capacity {capacity:,}, {2 * capacity:,} inserts in {episodes} episodes of 100-1,000 steps")
    sides = {
        kind.name: measure(kind, capacity, feed, repeats, CLOCKS[args.clock]) for kind in (Ours, SB3, Naive)
    }
    print(
        f"\n{STACK}x{FRAME[0]}x{FRAME[1]} uint8 observations; kB = 1,000 bytes; medians of {args.clock} time;"
        " one thread\n"
    )
    print_table(sides, Ours.name, SB3.name)
    print("\nthe course design this replaces: up to 14.3 kB per transition (a 2x capacity framebuffer)")
    print_goals(sides[Ours.name], sides[SB3.name])


if __name__ == "__main__":
    main()
