"""Our DQN on LunarLander-v3 with conf/tuned/dqn_lunarlander.yaml: final evaluation return per seed.

Each seed is one `python -m framework env=lunarlander agent=dqn seed=S tracking=none` run (one
torch thread), `--parallel` of them at a time; the final evaluation is the run's own:
10 deterministic episodes on a separately seeded env. `--sb3` adds Stable-Baselines3's DQN with
rl-zoo3's values (agent=sb3_dqn, its own preset's budget unless --steps is given) as a reference.

    python benchmarks/dqn_lunarlander.py [--seeds 0 1 2] [--parallel 2] [--steps N] [--sb3]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

SOLVED = 200.0
FINISHED = re.compile(r"FINISHED at step (\d+): eval/return_mean=(-?[\d.]+)")


def run(agent: str, seed: int, steps: int | None, cwd: Path) -> tuple[int, float, float]:
    """(env steps, final eval return, wall seconds) of one run through the command line."""
    budget = [f"total_steps={steps}"] if steps else []
    cmd = [
        sys.executable, "-m", "framework", "env=lunarlander", f"agent={agent}", f"seed={seed}", *budget,
        "tracking=none", "progress=log", "checkpoint.every_steps=0", "eval.every_steps=0",
        f"hydra.run.dir=outputs/{agent}-{seed}",
    ]  # fmt: skip
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    found = FINISHED.search(p.stdout + p.stderr)
    if p.returncode != 0 or found is None:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{(p.stdout + p.stderr)[-3000:]}")
    return int(found.group(1)), float(found.group(2)), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--steps", type=int, help="override the presets' total_steps")
    parser.add_argument("--sb3", action="store_true", help="also run Stable-Baselines3's DQN (zoo values)")
    args = parser.parse_args()
    agents = [("dqn", "ours (agent=dqn)")] + (
        [("sb3_dqn", "Stable-Baselines3 DQN (zoo)")] if args.sb3 else []
    )
    jobs = [(agent, seed) for agent, _ in agents for seed in args.seeds]
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(args.parallel) as pool:
        results = dict(zip(jobs, pool.map(lambda job: run(*job, args.steps, Path(tmp)), jobs), strict=True))
    print(f"\nLunarLander-v3, {args.parallel} runs at a time on this machine, 1 torch thread each")
    print("| agent | seed | env steps | final eval return (10 episodes) | wall time |")
    print("|---|---|---|---|---|")
    for agent, label in agents:
        for seed in args.seeds:
            steps, score, wall = results[(agent, seed)]
            print(f"| {label} | {seed} | {steps} | {score:.1f} | {wall:.0f} s |")
        solved = sum(results[(agent, seed)][1] >= SOLVED for seed in args.seeds)
        print(f"| {label} | solved (>= {SOLVED:.0f}) | | {solved} of {len(args.seeds)} | |")


if __name__ == "__main__":
    main()
