"""The documented ranges of SB3's (and sb3-contrib's) hyperparameters, by constructor argument name.

`agent.hyperparams` is a free mapping handed to the algorithm's constructor, so its values have no
schema of ours to declare their ranges beside: this table holds them, from the constructors'
docstrings (a discount factor in [0, 1], a learning rate > 0, a count >= 1). A value outside its range
is refused before the run starts; SB3 itself would train on it silently (gamma=1.5) or fail after
the run started (learning_rate < 0, n_steps=0). A name not here is still held to finiteness and 64 bits.
"""

from __future__ import annotations

from dataclasses import MISSING
from typing import Any

from framework.errors import ConfigError
from framework.values import Bounds, check_number, refusal, show

#: Each hyperparameter's range, where its docstring (or what the algorithm does with it) gives one.
HYPERPARAM_BOUNDS: dict[str, Bounds] = {
    "learning_rate": Bounds(gt=0),
    "gamma": Bounds(ge=0, le=1),
    "gae_lambda": Bounds(ge=0, le=1),
    "n_steps": Bounds(ge=1),
    "batch_size": Bounds(ge=1),
    "n_epochs": Bounds(ge=1),
    "clip_range": Bounds(gt=0),
    "clip_range_vf": Bounds(gt=0),
    "ent_coef": Bounds(ge=0),
    "vf_coef": Bounds(ge=0),
    "max_grad_norm": Bounds(gt=0),
    "target_kl": Bounds(gt=0),
    "rms_prop_eps": Bounds(gt=0),
    "sde_sample_freq": Bounds(ge=1, also=(-1,)),
    "stats_window_size": Bounds(ge=1),
    "buffer_size": Bounds(ge=1),
    "learning_starts": Bounds(ge=0),
    "tau": Bounds(gt=0, le=1),
    "train_freq": Bounds(ge=1),
    "gradient_steps": Bounds(ge=1, also=(-1,)),
    "target_update_interval": Bounds(ge=1),
    "exploration_fraction": Bounds(ge=0, le=1),
    "exploration_initial_eps": Bounds(ge=0, le=1),
    "exploration_final_eps": Bounds(ge=0, le=1),
    "policy_delay": Bounds(ge=1),
    "target_policy_noise": Bounds(ge=0),
    "target_noise_clip": Bounds(ge=0),
    "noise_std": Bounds(ge=0),
    # sb3-contrib: TQC, TRPO, ARS
    "top_quantiles_to_drop_per_net": Bounds(ge=0),
    "cg_max_steps": Bounds(ge=1),
    "cg_damping": Bounds(gt=0),
    "line_search_shrinking_factor": Bounds(gt=0, lt=1),
    "line_search_max_iter": Bounds(ge=1),
    "n_critic_updates": Bounds(ge=1),
    "sub_sampling_factor": Bounds(ge=1),
    "n_delta": Bounds(ge=1),
    "n_top": Bounds(ge=1),
    "delta_std": Bounds(gt=0),
    "n_eval_episodes": Bounds(ge=1),
}
#: SB3's units of `train_freq` given as [n, unit].
TRAIN_FREQ_UNITS = ("step", "episode")
#: An `auto` entropy coefficient (SAC, TQC) learns it, from 1 or from x with `auto_<x>`.
AUTO = "auto"


def check_range(name: str, key: str, value: Any, default: Any = None) -> None:
    """Refuse `value` of hyperparameter `key` (said as `name`, with the constructor's `default`)
    outside its documented range. Its forms: a number; `lin_<x>` (a schedule from x to 0: x in
    range); `train_freq` as [n, unit]; `ent_coef` as auto or auto_<x> (x > 0). Any other string
    for a ranged key is not a number."""
    bounds = HYPERPARAM_BOUNDS.get(key, Bounds())
    if isinstance(value, str):
        _check_text(name, key, value, bounds)
    elif key == "train_freq" and isinstance(value, list | tuple):
        if len(value) != 2 or value[1] not in TRAIN_FREQ_UNITS:
            raise ConfigError(
                f"{name}={value!r} is not valid: a number of steps, or [n, unit] with unit "
                f"{' or '.join(TRAIN_FREQ_UNITS)} ([4, step])"
            )
        if not isinstance(value[0], int) or isinstance(value[0], bool):
            raise ConfigError(f"{name}={value!r} is not valid: n of [n, unit] is an integer ([4, step])")
        check_number(f"{name}[0]", value[0], bounds)
    else:
        shown = default if isinstance(default, int | float) and not isinstance(default, bool) else MISSING
        check_number(name, value, bounds, default=shown)


def _check_text(name: str, key: str, value: str, bounds: Bounds) -> None:
    if value.startswith("lin_"):
        start = float(value[4:])  # parse_value checked it is a number
        # The schedule ends at 0: its start must be in range, and 0 within the range's closure.
        if not bounds.holds(start) or not bounds.closed().holds(0.0):
            raise ConfigError(
                f"{name}={value!r} must start {bounds.text()}: lin_<x> goes from x to 0 (x={show(start)})"
            )
        return
    if key == "ent_coef" and value.startswith(AUTO):
        initial = value.removeprefix(AUTO).removeprefix("_")
        try:
            number = float(initial) if initial else 1.0
        except ValueError:
            number = float("nan")
        if value != AUTO and not (value.startswith(AUTO + "_") and Bounds(gt=0).holds(number)):
            raise ConfigError(
                f"{name}={value!r} is not valid: auto (learned, from 1), auto_<x> (from x > 0: "
                "auto_0.1) or a number >= 0"
            )
        return
    if key in HYPERPARAM_BOUNDS:
        raise ConfigError(refusal(name, value, bounds) + ", not a string")
