"""Framework overhead: the same PPO-on-CartPole training, directly with SB3 and via `python -m framework`.

Both sides train rl-zoo3's tuned PPO (8 envs) for the same number of steps with one torch
thread, save the model and run a final 10-episode deterministic evaluation; the framework
side also tracks everything in ./mlflow.db (created by an untimed warm-up run, as it is for
every run but a user's first). Runs alternate between the two sides and the table reports
medians of whole-process wall time (imports included) and their ratio.

    python benchmarks/sb3_overhead.py [--steps 100000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# rl-zoo3's tuned PPO for CartPole-v1, the same values as conf/tuned/ppo_cartpole.yaml.
ZOO = dict(
    n_steps=32,
    batch_size=256,
    gae_lambda=0.8,
    gamma=0.98,
    n_epochs=20,
    ent_coef=0.0,
    learning_rate="lin_0.001",
    clip_range="lin_0.2",
)


def direct(steps: int, seed: int, out: Path) -> None:
    """The reference: plain SB3, as a user would write it."""
    import gymnasium as gym
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy

    torch.set_num_threads(1)
    env = make_vec_env("CartPole-v1", n_envs=8, seed=seed)

    def lin(x: float):
        return lambda progress: progress * x

    kwargs = {k: lin(float(v[4:])) if isinstance(v, str) else v for k, v in ZOO.items()}
    model = PPO("MlpPolicy", env, seed=seed, device="cpu", verbose=0, **kwargs)
    model.learn(total_timesteps=steps)
    model.save(out / "model.zip")
    eval_env = gym.make("CartPole-v1")
    mean, _ = evaluate_policy(model, eval_env, n_eval_episodes=10, deterministic=True)
    print(f"RESULT eval/return_mean={mean}")


def timed(cmd: list[str], cwd: Path) -> tuple[float, str]:
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{p.stderr[-3000:]}")
    return wall, p.stdout + p.stderr


def final_return(output: str) -> float:
    for line in reversed(output.splitlines()):
        if "eval/return_mean=" in line:
            return float(line.split("eval/return_mean=")[1].split(",")[0].split()[0])
    raise ValueError("no final eval/return_mean in output")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--direct", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.direct:
        direct(args.steps, args.seed, args.out)
        return

    rows: dict[str, list[tuple[float, float]]] = {"sb3 direct": [], "python -m framework": []}
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)

        def sb3(steps: int, seed: int) -> tuple[float, str]:
            args = [f"--steps={steps}", f"--seed={seed}", f"--out={cwd}"]
            return timed([sys.executable, __file__, "--direct", *args], cwd)

        def framework(steps: int, seed: int) -> tuple[float, str]:
            return timed(
                [
                    sys.executable, "-m", "framework", "env=cartpole", "agent=ppo",
                    f"total_steps={steps}", f"seed={seed}", "eval.every_steps=0",
                    "checkpoint.every_steps=0", "threads=1", "device=cpu", "progress=log",
                ],
                cwd,
            )  # fmt: skip

        sb3(512, 0), framework(512, 0)  # warm-up: file caches, and the MLflow store
        short: dict[str, list[float]] = {"sb3 direct": [], "python -m framework": []}
        for rep in range(args.repeats):
            short["sb3 direct"].append(sb3(512, rep)[0])
            short["python -m framework"].append(framework(512, rep)[0])
        for rep in range(args.repeats):
            seed = args.seed + rep
            wall, out = sb3(args.steps, seed)
            rows["sb3 direct"].append((wall, final_return(out)))
            wall, out = framework(args.steps, seed)
            rows["python -m framework"].append((wall, final_return(out)))
            times = ", ".join(f"{k} {v[-1][0]:.1f}s" for k, v in rows.items())
            print(f"repeat {rep + 1}/{args.repeats}: {times}", flush=True)

    base = statistics.median(w for w, _ in rows["sb3 direct"])
    print(f"\nPPO on CartPole-v1, {args.steps} steps, {args.repeats} repeats alternating")
    print("median whole-process wall time, imports included")
    print(f"{'side':<22}{'512 steps s':>12}{'wall s':>9}{'ratio':>8}{'steps/s':>9}  final eval returns")
    for name, results in rows.items():
        med = statistics.median(w for w, _ in results)
        fixed = statistics.median(short[name])
        returns = " ".join(f"{r:.0f}" for _, r in results)
        print(f"{name:<22}{fixed:>12.2f}{med:>9.1f}{med / base:>8.3f}{args.steps / med:>9.0f}  {returns}")
    paired = statistics.median(
        f / d for (f, _), (d, _) in zip(rows["python -m framework"], rows["sb3 direct"], strict=True)
    )
    fixed_cost = statistics.median(short["python -m framework"]) - statistics.median(short["sb3 direct"])
    overhead = statistics.median(w for w, _ in rows["python -m framework"]) / base - 1
    print(f"\nframework overhead: {overhead * 100:+.1f}% of median wall time (goal: within 5%)")
    print(f"median of paired ratios (framework / sb3, same seed, back to back): {paired:.3f}")
    print(f"fixed cost per run (512-step runs): {fixed_cost:+.2f} s")


if __name__ == "__main__":
    main()
