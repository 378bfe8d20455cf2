"""Agents: each owns its training loop, and the optional capabilities an agent may declare."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

if TYPE_CHECKING:
    from framework.context import RunContext
    from framework.contracts.buffer import Buffer
    from framework.contracts.env import EnvPlugin
    from framework.contracts.game import Evaluator
    from framework.contracts.search import SearchPlugin


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
class SearchAgent(Agent, Protocol):
    """An agent that plays by tree search: its batched evaluator (on its current network) is what
    the run's inference service serves, and the run's searches evaluate through that service.
    Loaded to play (`play RUN`, `gomocup RUN`), it moves its networks to the player's device."""

    def evaluator(self) -> Evaluator: ...
    def to(self, device: str) -> None: ...


@runtime_checkable
class EvaluatingAgent(Agent, Protocol):
    """An agent that evaluates itself (matches against opponents, say) instead of the run playing
    episodes of its `act`: metrics named `eval/...`, the run's objective among them; none (an empty
    dict, nothing logged) when it gives up because the run is stopping (`ctx.stop`)."""

    def evaluate(self, ctx: RunContext, *, episodes: int) -> dict[str, float]: ...


@runtime_checkable
class MetricNamingAgent(EvaluatingAgent, Protocol):
    """An EvaluatingAgent that names, before the run starts, every metric its `evaluate` logs on
    `env` (eval/<opponent>/win_rate, ...): the run then refuses an objective that is none of them."""

    def eval_metric_names(self, env: EnvPlugin) -> tuple[str, ...]: ...


@runtime_checkable
class CheckedAgent(Agent, Protocol):
    """An agent that can tell, before the run starts, that it cannot train with the run's other
    plugins (a buffer it cannot fill, say): `check_run` raises ConfigError naming what to change."""

    def check_run(self, *, env: EnvPlugin, buffer: Buffer | None, search: SearchPlugin | None) -> None: ...
