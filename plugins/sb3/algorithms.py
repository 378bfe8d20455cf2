"""Algorithm lookup and rl-zoo3-style hyperparameter parsing."""

from __future__ import annotations

import difflib
from typing import Any

import gymnasium as gym
import torch

SB3_ALGOS = ("A2C", "DDPG", "DQN", "PPO", "SAC", "TD3")
CONTRIB_ALGOS = ("ARS", "CrossQ", "MaskablePPO", "QRDQN", "RecurrentPPO", "TQC", "TRPO")


def available_algorithms() -> dict[str, Any]:
    """Algorithm classes by upper-case name: SB3's, and sb3-contrib's when it is installed."""
    import stable_baselines3

    found = {name: getattr(stable_baselines3, name) for name in SB3_ALGOS}
    try:
        import sb3_contrib
    except ImportError:
        return found
    for name in CONTRIB_ALGOS:
        if hasattr(sb3_contrib, name):
            found[name.upper()] = getattr(sb3_contrib, name)
    return found


def algorithm_class(name: str) -> Any:
    algos = available_algorithms()
    if name.upper() in algos:
        return algos[name.upper()]
    close = difflib.get_close_matches(name.upper(), list(algos), n=1)
    hint = f" Did you mean {close[0]}?" if close else ""
    raise ValueError(f"Unknown SB3 algorithm agent.algo={name!r}.{hint} Available: {', '.join(algos)}")


def default_policy(space: gym.Space) -> str:
    from stable_baselines3.common.preprocessing import is_image_space

    if isinstance(space, gym.spaces.Dict):
        return "MultiInputPolicy"
    if is_image_space(space, check_channels=False):
        return "CnnPolicy"
    return "MlpPolicy"


def linear_schedule(start: float) -> Any:
    """rl-zoo3's `lin_<x>`: x at the start of training, 0 at the end."""

    def schedule(progress_remaining: float) -> float:
        return progress_remaining * start

    return schedule


def parse_value(key: str, value: Any) -> Any:
    if isinstance(value, str) and value.startswith("lin_"):
        return linear_schedule(float(value[4:]))
    if key == "train_freq" and isinstance(value, list):
        return (int(value[0]), str(value[1]))
    return value


def build_kwargs(
    hyperparams: dict[str, Any], policy_kwargs: dict[str, Any], action_space: gym.Space
) -> dict[str, Any]:
    """Constructor kwargs from config: schedules, action noise and policy kwargs decoded."""
    kwargs = {k: parse_value(k, v) for k, v in hyperparams.items()}
    noise_type = kwargs.pop("noise_type", None)
    noise_std = float(kwargs.pop("noise_std", 0.1))
    if noise_type is not None:
        kwargs["action_noise"] = action_noise(str(noise_type), noise_std, action_space)
    pk = dict(policy_kwargs)
    if isinstance(pk.get("activation_fn"), str):
        pk["activation_fn"] = activation(pk["activation_fn"])
    if pk:
        kwargs["policy_kwargs"] = pk
    return kwargs


def activation(name: str) -> type[torch.nn.Module]:
    options = {n.lower(): n for n in ("ReLU", "Tanh", "ELU", "GELU", "LeakyReLU", "SiLU", "Sigmoid")}
    key = name.rsplit(".", 1)[-1].lower()
    if key not in options:
        raise ValueError(f"Unknown activation_fn {name!r}; choose one of {', '.join(options.values())}")
    cls: type[torch.nn.Module] = getattr(torch.nn, options[key])
    return cls


def action_noise(kind: str, std: float, space: gym.Space) -> Any:
    """rl-zoo3's noise_type/noise_std, sized to the env's action space."""
    import numpy as np
    from stable_baselines3.common.noise import NormalActionNoise, OrnsteinUhlenbeckActionNoise

    kinds = {"normal": NormalActionNoise, "ornstein-uhlenbeck": OrnsteinUhlenbeckActionNoise}
    if kind not in kinds:
        raise ValueError(f"Unknown noise_type {kind!r}; choose one of {', '.join(kinds)}")
    if not isinstance(space, gym.spaces.Box):
        raise ValueError(f"noise_type={kind!r} needs a continuous (Box) action space, not {space}")
    n = int(np.prod(space.shape))
    return kinds[kind](mean=np.zeros(n), sigma=std * np.ones(n))
