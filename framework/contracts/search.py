"""Tree-search engines, and where self-play games come from."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np

    from framework.contracts.game import BoardGame, BoardState, Evaluator


@runtime_checkable
class SearchEngine(Protocol):
    """Tree search over a batch of roots: visit counts back, everything released by close().

    Built by the run with what it needs: the game's rules, a factory of the batched evaluator
    (called when the engine first needs it, in the process or actor that evaluates) and a seed.
    A constructor starts nothing. Root i of each call is game slot i: an engine may keep slot
    i's tree for the next call when the new root follows from the last by the moves since.
    """

    Config: ClassVar[type]
    num_simulations: int
    """Simulations per root and call; a runner may change it between calls (a schedule)."""

    def __init__(
        self, cfg: Any, *, game: BoardGame, evaluator_factory: Callable[[], Evaluator], seed: int
    ) -> None: ...
    def search(self, roots: Sequence[BoardState], *, add_noise: bool = False) -> np.ndarray:
        """Visit counts [len(roots), n_actions]; `add_noise` mixes Dirichlet noise into each start
        node's priors (the root, or a kept root) and nowhere deeper."""
        ...

    @property
    def root_values(self) -> np.ndarray:
        """The last call's root values from the view of each root's player to move, [B]."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class MeasuredSearch(Protocol):
    """A search engine that reports tuning figures (perf/sims_per_s, perf/batch_fill, ...)."""

    def perf_metrics(self) -> dict[str, float]:
        """The figures since the last call (empty when nothing was searched), then starts anew."""
        ...


@runtime_checkable
class SelfPlaySource(Protocol):
    """Where self-play games come from: a runner in this process, or workers elsewhere."""

    def step(self) -> tuple[int, list[Any]]:
        """(moves played since the last call, records of the games that ended)."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class DistributedSearch(Protocol):
    """A search engine that can run self-play in workers of its own (Ray actors, say)."""

    def self_play(
        self, make_runner: Callable[[SearchEngine, int], SelfPlaySource], *, seed: int
    ) -> SelfPlaySource | None:
        """A source whose workers each play `make_runner(their engine, their seed)`, with this
        engine's evaluator kept in step; None when the engine's config plays in this process.
        `make_runner` must be picklable (a module-level function or a partial of one)."""
        ...
