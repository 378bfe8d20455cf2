"""Env steps/s of our DQN's Atari preset (conf/tuned/dqn_atari.yaml) on the CPU, once it trains.

Pong with the preset's values (Nature CNN, MemoryEfficientReplayBuffer, a gradient step every 4
env steps) except a short warm-up: the clock starts when learning_starts is reached and
stops `--steps` env steps later. One torch thread, as `threads: 1` runs.

    python benchmarks/dqn_atari.py [--warm-up 2000] [--steps 4000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from dqn_cartpole import build_context

from framework.context import RunContext


class TimedContext(RunContext):
    """Notes the time at the first step at or past `mark`."""

    mark = 0
    marked_at = 0.0

    def after_step(self, step: int, agent: Any) -> bool:
        if step >= self.mark and not self.marked_at:
            self.marked_at = time.perf_counter()
        return super().after_step(step, agent)


def measure(warm_up: int, steps: int, seed: int, out: Path) -> float:
    """Env steps/s over the `steps` env steps after `warm_up` (= learning_starts)."""
    import torch

    from framework.app import compose

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    cfg = compose(
        [
            "env=atari", "env.game=Pong", "agent=dqn", f"agent.learning_starts={warm_up}",
            f"total_steps={warm_up + steps}", f"seed={seed}", "eval.every_steps=0",
        ]
    )  # fmt: skip
    agent, ctx = build_context(cfg, out, TimedContext)
    ctx.mark = warm_up
    agent.learn(ctx)
    return steps / (time.perf_counter() - ctx.marked_at)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warm-up", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=4000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rates = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(args.repeats):
            rates.append(measure(args.warm_up, args.steps, seed, Path(tmp)))
            print(f"repeat {seed + 1}/{args.repeats}: {rates[-1]:.0f} env steps/s", flush=True)
    print(
        f"\nPong, conf/tuned/dqn_atari.yaml, CPU, 1 torch thread, {args.steps} env steps past learning_starts"
    )
    print("| env steps/s (median) | min | max |")
    print("|---|---|---|")
    print(f"| {statistics.median(rates):.0f} | {min(rates):.0f} | {max(rates):.0f} |")


if __name__ == "__main__":
    sys.exit(main())
