"""Mini-batches that divide the rollout, so that a tuned preset stays valid when `env.n_envs` changes.

An on-policy algorithm (PPO, TRPO) cuts each rollout of n_steps x n_envs steps into mini-batches of
batch_size; where batch_size does not divide it, every epoch ends on a short mini-batch and SB3
warns. A preset's batch_size was tuned for its own n_envs: with another it follows, to the divisor
of the new rollout nearest to it, saying so in one line. A batch_size the command line set is the
user's choice: one that does not divide is refused before the run starts, naming divisors to write.
"""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from framework.errors import ConfigError

log = logging.getLogger(__name__)

KEY = "agent.hyperparams.batch_size"


@dataclass(frozen=True)
class MiniBatch:
    """The batch_size to build the algorithm with, and the line that says why it is not the config's."""

    batch_size: int
    note: str = ""


def takes_minibatches(algo: Any) -> bool:
    """Whether `algo` cuts rollouts into mini-batches (PPO, TRPO, their sb3-contrib variants)."""
    parameters = inspect.signature(algo.__init__).parameters
    return "rollout_buffer_class" in parameters and "batch_size" in parameters and "n_steps" in parameters


def set_on_the_command_line(key: str = KEY) -> bool:
    """Whether this run's (or sweep's) command line set `key`: Hydra's overrides, read as typed (an
    interpolation in one stays text). Outside a Hydra application (a notebook's `compose`) nothing is."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    if not HydraConfig.initialized():
        return False
    overrides = OmegaConf.to_container(HydraConfig.get().overrides.task, resolve=False)
    assert isinstance(overrides, list)
    return any(str(o).split("=", 1)[0].lstrip("+~") == key for o in overrides)


def minibatch(algo: Any, hyperparams: Mapping[str, Any], n_envs: int, *, explicit: bool) -> MiniBatch | None:
    """The mini-batch size to use for `algo` over `n_envs` envs (None: the algorithm has no
    mini-batches); a ConfigError where an `explicit` batch_size does not divide the rollout."""
    if not takes_minibatches(algo):
        return None
    defaults = {n: p.default for n, p in inspect.signature(algo.__init__).parameters.items()}
    batch_size = int(hyperparams.get("batch_size", defaults["batch_size"]))
    n_steps = int(hyperparams.get("n_steps", defaults["n_steps"]))
    rollout = n_steps * n_envs
    if rollout % batch_size == 0:
        return MiniBatch(batch_size)
    nearest = nearest_divisors(rollout, batch_size)
    sizes = f"n_steps x env.n_envs = {n_steps} x {n_envs} = {rollout}"
    if explicit:
        raise ConfigError(
            f"{KEY}={batch_size} does not divide the rollout of {sizes} steps: write "
            f"{KEY}={' or '.join(map(str, nearest))} (or drop it: the config's follows env.n_envs)"
        )
    default = "batch_size" not in hyperparams or batch_size == defaults["batch_size"]
    whose = f"{algo.__name__}'s default" if default else "the preset's"
    return MiniBatch(
        nearest[0],
        f"{KEY}={batch_size} ({whose}) follows the rollout of {sizes} steps: "
        f"{algo.__name__} uses {nearest[0]}, the nearest divisor",
    )


def nearest_divisors(rollout: int, wanted: int) -> list[int]:
    """The divisors of `rollout` next to `wanted`, nearest first: the one below and the one above
    (one where `wanted` exceeds the rollout). A mini-batch of 1 only for a rollout of 1, since
    advantages normalised over one step are undefined."""
    pairs = (d for i in range(1, math.isqrt(rollout) + 1) if rollout % i == 0 for d in (i, rollout // i))
    divisors = sorted(set(pairs) - {1}) or [rollout]
    below = [d for d in divisors if d < wanted][-1:]
    above = [d for d in divisors if d > wanted][:1]
    return sorted(below + above, key=lambda d: (abs(d - wanted), -d))
