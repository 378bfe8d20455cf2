"""Evaluation episodes on a separate, separately seeded environment."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

Policy = Callable[[Any], Any]


def run_episodes(
    act: Policy, env: Any, *, episodes: int, seed: int, max_steps: int = 1_000_000
) -> dict[str, float]:
    """Play `episodes` full episodes with `act`; the first reset is seeded, so results repeat.

    An env may report per-episode numbers in `info["episode_stats"]` on an episode's last
    step (a fighting game's win, damage dealt); their means are returned as `eval/<name>`.
    """
    returns, lengths = [], []
    stats: dict[str, list[float]] = {}
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed if episode == 0 else None)
        total, length, done = 0.0, 0, False
        info: dict[str, Any] = {}
        while not done and length < max_steps:
            obs, reward, terminated, truncated, info = env.step(act(obs))
            total += float(reward)
            length += 1
            done = bool(terminated or truncated)
        returns.append(total)
        lengths.append(length)
        for key, value in info.get("episode_stats", {}).items():
            stats.setdefault(key, []).append(float(value))
    return {
        **{f"eval/{key}": float(np.mean(values)) for key, values in stats.items()},
        "eval/return_mean": float(np.mean(returns)),
        "eval/return_std": float(np.std(returns)),
        "eval/return_min": float(np.min(returns)),
        "eval/return_max": float(np.max(returns)),
        "eval/length_mean": float(np.mean(lengths)),
    }


def record_video(env: Any, folder: Path, episodes: int) -> Any:
    """Wrap an `rgb_array` env so its first `episodes` episodes are written as mp4 to `folder`."""
    from gymnasium.wrappers import RecordVideo

    # Frames are drawn off-screen: SDL (pygame, which classic-control envs draw with) needs no display,
    # and without one it would complain about XDG_RUNTIME_DIR on every run.
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")

    return RecordVideo(
        env, str(folder), episode_trigger=lambda e: e < episodes, name_prefix="eval", disable_logger=True
    )
