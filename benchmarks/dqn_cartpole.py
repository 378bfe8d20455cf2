"""Our DQN against Stable-Baselines3's DQN on CartPole-v1, with rl-zoo3's tuned hyperparameters.

Both sides read their values from the configs (conf/tuned/dqn_cartpole.yaml for ours,
conf/tuned/sb3_dqn_cartpole.yaml for SB3's) and the shared ones are checked to be identical;
each trains for 50k env steps with one torch thread in its own process, SB3 directly through
its library API and ours through the agent plugin with the framework's services (no
tracking, no periodic evaluation or checkpoints). Env steps/s is over the wall time of
building the model and training it; the final score is a deterministic 10-episode
evaluation on the same separately seeded env for both. Runs alternate between the sides,
seed by seed. A third side runs ours with IEEE denormals (agent.flush_denormal=false), so the
table shows what flushing them to zero buys on its own.

    python benchmarks/dqn_cartpole.py [--seeds 0 1 2] [--steps 50000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

#: ours_ieee: ours with agent.flush_denormal=false, to show what flushing denormals to zero buys.
SIDES = ("sb3", "ours", "ours_ieee")
LABELS = {
    "sb3": "Stable-Baselines3 DQN",
    "ours": "ours (agent=dqn)",
    "ours_ieee": "ours, IEEE denormals (agent.flush_denormal=false)",
}
SOLVED = 475.0


def zoo_values(steps: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """(SB3 DQN kwargs, our agent config) from the presets; fails if a shared value differs."""
    from omegaconf import OmegaConf

    from framework.app import compose

    sb3 = OmegaConf.to_container(compose(["env=cartpole", "agent=sb3_dqn"]).agent, resolve=True)
    ours_cfg = compose(["env=cartpole", "agent=dqn", f"total_steps={steps}"])
    ours = OmegaConf.to_container(ours_cfg.agent, resolve=True)
    assert isinstance(sb3, dict) and isinstance(ours, dict)
    hp = dict(sb3["hyperparams"])
    exploration = ours["exploration"]
    shared = {
        "learning_rate": (hp["learning_rate"], ours["learning_rate"]["start"]),
        "batch_size": (hp["batch_size"], ours["batch_size"]),
        "buffer_size": (hp["buffer_size"], ours_cfg.buffer.capacity),
        "learning_starts": (hp["learning_starts"], ours["learning_starts"]),
        "gamma": (hp["gamma"], ours["gamma"]),
        "target_update_interval": (hp["target_update_interval"], ours["target_update_interval"]),
        "train_freq": (hp["train_freq"], ours["train_freq"]),
        "gradient_steps": (hp["gradient_steps"], ours["gradient_steps"]),
        "exploration_fraction": (hp["exploration_fraction"], exploration["fraction"]),
        "exploration_initial_eps": (hp["exploration_initial_eps"], exploration["start"]),
        "exploration_final_eps": (hp["exploration_final_eps"], exploration["end"]),
        "max_grad_norm": (hp["max_grad_norm"], ours["max_grad_norm"]),
        "net_arch": (list(sb3["policy_kwargs"]["net_arch"]), list(ours["hidden_sizes"])),
    }
    differ = {key: pair for key, pair in shared.items() if pair[0] != pair[1]}
    if differ:
        raise SystemExit(f"the presets differ in shared hyperparameters (sb3, ours): {differ}")
    return hp | {"policy_kwargs": dict(sb3["policy_kwargs"])}, ours


def evaluate(act: Any, seed: int) -> float:
    """The framework's final evaluation: 10 deterministic episodes on a separately seeded env."""
    import gymnasium as gym

    from framework.evaluation import evaluation_seed, run_episodes

    env = gym.make("CartPole-v1")
    metrics = run_episodes(act, env, episodes=10, seed=evaluation_seed(seed))
    return metrics["eval/return_mean"]


def train_sb3(seed: int, steps: int) -> dict[str, float]:
    import gymnasium as gym
    import torch
    from stable_baselines3 import DQN

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    kwargs, _ = zoo_values(steps)
    t0 = time.perf_counter()
    model = DQN("MlpPolicy", gym.make("CartPole-v1"), seed=seed, device="cpu", verbose=0, **kwargs)
    model.learn(total_timesteps=steps)
    wall = time.perf_counter() - t0
    score = evaluate(lambda obs: model.predict(obs, deterministic=True)[0], seed)
    return {"steps_per_s": steps / wall, "return": score}


def build_context(cfg: Any, out: Path, context_class: Any = None) -> tuple[Any, Any]:
    """(agent, RunContext) for a composed config, as the run lifecycle builds them: no tracking,
    no progress output, no checkpoints; evaluation as cfg.eval says."""
    import numpy as np

    from framework import config
    from framework.checkpoint import Checkpointer
    from framework.context import RunContext
    from framework.progress import ProgressDisplay
    from framework_plugins.trackers.null_tracker import NullTracker

    env, agent, buffer = (config.plugin_section(cfg, s) for s in ("env", "agent", "buffer"))
    assert env is not None and agent is not None and buffer is not None
    ctx = (context_class or RunContext)(
        cfg=cfg,
        env_plugin=env.plugin(env.cfg),
        seed=int(cfg.seed),
        rng=np.random.default_rng(int(cfg.seed)),
        device="cpu",
        total_steps=int(cfg.total_steps),
        tracker=NullTracker(None),
        checkpointer=Checkpointer(out, every_steps=0, keep=1, config_yaml=""),
        progress=ProgressDisplay(int(cfg.total_steps), mode="off"),
        run_dir=out,
        buffer=buffer.plugin(buffer.cfg),
    )
    return agent.plugin(agent.cfg), ctx


def train_ours(seed: int, steps: int, out: Path, *, flush_denormal: bool = True) -> dict[str, float]:
    import torch

    from framework.app import compose

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    zoo_values(steps)
    cfg = compose([
        "env=cartpole", "agent=dqn", f"total_steps={steps}", f"seed={seed}", "eval.every_steps=0",
        f"agent.flush_denormal={str(flush_denormal).lower()}",
    ])  # fmt: skip
    t0 = time.perf_counter()
    agent, ctx = build_context(cfg, out)
    agent.learn(ctx)
    wall = time.perf_counter() - t0
    score = evaluate(lambda obs: agent.act(obs, deterministic=True), seed)
    return {"steps_per_s": steps / wall, "return": score}


def run_side(side: str, seed: int, steps: int, out: Path) -> dict[str, float]:
    cmd = [
        sys.executable,
        __file__,
        "--side",
        side,
        "--seeds",
        str(seed),
        "--steps",
        str(steps),
        "--out",
        str(out),
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if p.returncode != 0:
        raise RuntimeError(f"{side} seed {seed} failed:\n{p.stderr[-3000:]}")
    result: dict[str, float] = json.loads(p.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=50_000)
    parser.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=Path("/tmp/dqn_cartpole_bench"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        if args.side == "sb3":
            result = train_sb3(args.seeds[0], args.steps)
        else:
            result = train_ours(args.seeds[0], args.steps, args.out, flush_denormal=args.side == "ours")
        print(json.dumps(result))
        return

    _, ours = zoo_values(args.steps)
    extras = {k: ours[k] for k in ("n_step", "learning_rate", "dueling", "double_q", "loss", "tau")}
    print(f"DQN on CartPole-v1, {args.steps} env steps, rl-zoo3's values; our extra settings: {extras}")
    results: dict[str, list[dict[str, float]]] = {side: [] for side in SIDES}
    for seed in args.seeds:
        for side in SIDES:
            results[side].append(run_side(side, seed, args.steps, args.out))
            r = results[side][-1]
            print(f"seed {seed} {side}: return {r['return']:.1f}, {r['steps_per_s']:.0f} steps/s", flush=True)

    base = statistics.median(r["steps_per_s"] for r in results["sb3"])
    print()
    seeds = " | ".join(f"seed {s}" for s in args.seeds)
    print(f"| side | final eval return: {seeds} | solved (>= {SOLVED:.0f}) | median env steps/s | ratio |")
    print("|---|" + "---|" * len(args.seeds) + "---|---|---|")
    for side, label in LABELS.items():
        rows = results[side]
        returns = " | ".join(f"{r['return']:.1f}" for r in rows)
        solved = sum(r["return"] >= SOLVED for r in rows)
        rate = statistics.median(r["steps_per_s"] for r in rows)
        print(f"| {label} | {returns} | {solved} of {len(rows)} | {rate:.0f} | {rate / base:.2f} |")


if __name__ == "__main__":
    main()
