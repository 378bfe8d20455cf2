"""Agents, the optional capabilities an agent may declare, and the RunContext its `learn` is handed."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

if TYPE_CHECKING:
    import threading
    from collections.abc import Mapping

    import gymnasium as gym
    import numpy as np
    from omegaconf import DictConfig

    from framework.contracts.buffer import Buffer
    from framework.contracts.env import EnvPlugin
    from framework.contracts.tracker import Tracker


@runtime_checkable
class Agent(Protocol):
    """Owns its training loop; uses the framework's services through the RunContext."""

    Config: ClassVar[type]

    def __init__(self, cfg: Any) -> None: ...
    def learn(self, ctx: RunContext) -> None: ...
    def act(self, obs: Any, *, deterministic: bool = True) -> Any: ...
    def save(self, path: Path) -> None: ...
    def load(self, path: Path) -> None: ...


@runtime_checkable
class EvaluatingAgent(Agent, Protocol):
    """An agent that evaluates itself (matches against opponents, say) instead of the run playing its `act`.
    Returns `eval/...` metrics, the run's objective among them; {} (nothing logged) when `ctx.stop` is set."""

    def evaluate(self, ctx: RunContext, *, episodes: int) -> dict[str, float]: ...


@runtime_checkable
class MetricNamingAgent(EvaluatingAgent, Protocol):
    """An EvaluatingAgent that names, before the run starts, every metric its `evaluate` logs on `env`:
    the run then refuses an objective that is none of them."""

    def eval_metric_names(self, env: EnvPlugin) -> tuple[str, ...]: ...


@runtime_checkable
class CheckedAgent(Agent, Protocol):
    """An agent whose `check_run` raises ConfigError, before the run starts, naming what to change in plugins
    it cannot train with. `parts`: the run's plugins of the kinds plugin packages add, by kind (`search`)."""

    def check_run(self, *, env: EnvPlugin, buffer: Buffer | None, parts: Mapping[str, object]) -> None: ...


@runtime_checkable
class RunPart(Protocol):
    """What a run holds of an added kind's plugin (the run's searches and their inference service)."""

    def interrupt(self) -> None:
        """The run is stopping (Ctrl-C, SIGTERM): end at once what is under way."""
        ...

    def close(self) -> None:
        """Release everything it started; the run calls it on every exit path."""
        ...


class RunContext(Protocol):
    """The run as an agent sees it."""

    @property
    def cfg(self) -> DictConfig:
        """The run's resolved config."""
        ...

    @property
    def env_plugin(self) -> EnvPlugin: ...
    @property
    def n_envs(self) -> int: ...
    @property
    def seed(self) -> int: ...
    @property
    def rng(self) -> np.random.Generator: ...
    @property
    def device(self) -> str:
        """The torch device the run was given (`auto` resolved)."""
        ...

    @property
    def total_steps(self) -> int: ...
    @property
    def start_step(self) -> int:
        """The step the run starts from: 0, or a resumed run's checkpoint."""
        ...

    @property
    def stop(self) -> threading.Event:
        """Set when the run is asked to stop (Ctrl-C, SIGTERM): the agent ends its loop soon."""
        ...

    @property
    def tracker(self) -> Tracker: ...
    @property
    def buffer(self) -> Buffer | None:
        """The run's buffer (a config with buffer=...), else None."""
        ...

    @property
    def parts(self) -> Mapping[str, RunPart]:
        """What the run holds of each added kind's plugin, by kind (`search`: searches, inference service)."""
        ...

    def make_env(
        self, index: int = 0, *, evaluation: bool = False, render_mode: str | None = None
    ) -> gym.Env: ...
    def log_metrics(self, metrics: dict[str, float], step: int) -> None: ...
    def after_step(self, step: int, agent: Agent) -> bool:
        """Steps advanced to `step` in all: progress, evaluation, checkpoints. False: stop."""
        ...
