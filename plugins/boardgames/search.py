"""Searches over a batch of board-game roots, the run's inference service they evaluate through,
the search plugins that start the one and make the others, and where self-play games come from."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from framework.contracts import Agent

if TYPE_CHECKING:
    import numpy as np

    from framework_plugins.boardgames.game import BoardGame, BoardState, Evaluator

#: The model every search of a run evaluates with unless told another (a candidate under gating):
#: the network self-play, evaluation and play search with.
BEST = "best"


@dataclass(frozen=True)
class SearchRequest:
    """What one call searches: its own simulations, noise and time budget (mctx's search arguments).
    A field left None is the search's own default (`search.num_simulations`, `search.dirichlet_epsilon`)."""

    simulations: int | Sequence[int] | None = None
    """Simulations per root, for all roots or one number per root."""
    add_noise: bool | Sequence[bool] = False
    """Exploration noise at each start node (the root, or a kept root) and nowhere deeper; for all
    roots or per root."""
    dirichlet_epsilon: float | None = None
    """The noise's weight."""
    deadline: float | None = None
    """A `time.perf_counter()` value: the search stops there, short of its simulations if it must,
    once every root has a visited move."""


@dataclass(frozen=True)
class SearchResult:
    """What one call found, root i for the call's root i (mctx's PolicyOutput)."""

    visits: np.ndarray
    """Visit counts of each root's moves, [B, n_actions]."""
    values: np.ndarray
    """Each root's value from the view of its player to move, [B]."""
    policy_targets: np.ndarray
    """Each root's improved policy, [B, n_actions]: what self-play trains toward."""
    chosen_moves: np.ndarray
    """The move the search chose for each root, [B]; -1 where the caller picks one from the visits."""
    version: int
    """The weights' version the call began with: every evaluation it used was of it or newer."""
    simulations: int
    """Simulations the call ran, over all its roots (a kept subtree's earlier visits are not its own)."""


@runtime_checkable
class SearchEngine(Protocol):
    """Tree search over a batch of roots: a request in, a result back, everything released by close().

    Made by the run's search plugin over the run's inference service. Root i of each call is game
    slot i: a search may keep slot i's tree for the next call when the new root follows from the
    last by the moves since.
    """

    @property
    def num_simulations(self) -> int:
        """Simulations per root of a request that gives none (`search.num_simulations`)."""
        ...

    @property
    def dirichlet_epsilon(self) -> float:
        """Weight of the start node's Dirichlet noise in a request that gives none."""
        ...

    simulations: int
    """Simulations run since it was made."""

    def search(self, roots: Sequence[BoardState], request: SearchRequest | None = None) -> SearchResult:
        """Search `roots` as `request` says (None: the search's own simulations, no noise, no
        deadline). A call says what it searches: no caller sets a search's attributes."""
        ...

    def perf_metrics(self) -> dict[str, float]:
        """Tuning figures (perf/search_sims_per_s, perf/batch_fill, ...) since the last call."""
        ...

    def interrupt(self) -> None:
        """End the call under way (from a signal handler or another thread) as its deadline would;
        a later call is not affected."""
        ...

    def warm_up(self, root: BoardState) -> None:
        """A search of a few simulations from `root`, so that the first real search does not wait
        for compiled kernels and the network's first call (a fresh install compiles for seconds)."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class InferenceService(Protocol):
    """The run's network, one service per run: every search of the run evaluates through it.

    It holds the network under model names (the one self-play uses, a candidate under gating),
    each with a version that `publish` raises; a search answers only with weights at least as new
    as the version current when it began.
    """

    def publish(self, model: str, weights: Mapping[str, np.ndarray]) -> int:
        """New weights for `model`; returns its new version."""
        ...

    def version(self, model: str) -> int: ...
    def close(self) -> None: ...


@runtime_checkable
class SearchPlugin(Protocol):
    """A kind of search: starts the run's inference service once, and makes searches over it."""

    Config: ClassVar[type]

    def __init__(self, cfg: Any) -> None: ...
    def start_inference(
        self,
        source: Callable[[], Evaluator],
        *,
        device: str,
        threads: int = 1,
        should_stop: Callable[[], bool],
    ) -> InferenceService:
        """The run's service for the network `source()` gives (a PortableEvaluator is rebuilt where
        it runs, and its weights published; another evaluator runs as it is). `threads` are the
        CPU threads the run's searches may walk their trees on (the run's `threads`; 0: every core).
        A wait it makes (a restarting actor) ends when `should_stop()` (Ctrl-C)."""
        ...

    def make(self, *, game: BoardGame, inference: Any, model: str, seed: int) -> SearchEngine:
        """A search of `game` evaluating with `model` of the service."""
        ...


@runtime_checkable
class SearchAgent(Agent, Protocol):
    """An agent that plays by tree search: its batched evaluator (on its current network) is what
    the run's inference service serves, and the run's searches evaluate through that service.
    Loaded to play (`play RUN`, `gomocup RUN`), it moves its networks to the player's device."""

    def evaluator(self) -> Evaluator: ...
    def to(self, device: str) -> None: ...


@runtime_checkable
class Measured(Protocol):
    """Something that reports tuning figures (a search, distributed self-play)."""

    def perf_metrics(self) -> dict[str, float]:
        """The figures since the last call (empty when nothing was searched), then starts anew."""
        ...


@runtime_checkable
class SelfPlaySource(Protocol):
    """Where self-play games come from: a runner in this process, or workers elsewhere."""

    def configure(self, settings: Mapping[str, float]) -> None:
        """The runner's settings from now on (temperature, dirichlet_epsilon, num_simulations)."""
        ...

    def step(self) -> tuple[int, list[Any]]:
        """(moves played since the last call, records of the games that ended)."""
        ...

    @property
    def simulations(self) -> int:
        """Simulations its searches have run."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class DrawWeighingSearch(Protocol):
    """A search plugin that can count a draw as a loss for the player to move (`draw_contempt`, in
    [0, 1]: a player's setting, not self-play's)."""

    @property
    def draw_contempt(self) -> float: ...


@runtime_checkable
class DistributedSearch(Protocol):
    """A search plugin whose inference service other processes join (Ray actors, say): an agent that
    plays self-play in workers of its own makes each worker's search with `join`."""

    def expect_workers(self, count: int, *, num_cpus: float, keys: str) -> None:
        """`count` processes of `num_cpus` CPUs each that the caller will start beside the service's
        own (on its Ray): counted in what the service asks of its cluster, and refused now, a
        ConfigError naming `keys` with the search's own, when the cluster cannot hold them all.
        A later call replaces the earlier."""
        ...

    def join(self, address: Any, *, game: BoardGame, model: str, seed: int) -> SearchEngine:
        """In another process (a worker): a search of `game` over the run's inference service at
        `address` (the service's own `address`, picklable), evaluating with `model`."""
        ...


@runtime_checkable
class SharedInference(Protocol):
    """An inference service other processes join, at its `address` (a DistributedSearch's)."""

    @property
    def address(self) -> Any:
        """What a worker joins the service with (picklable)."""
        ...

    def publish(self, model: str, weights: Mapping[str, np.ndarray]) -> int: ...
    def version(self, model: str) -> int: ...
    def perf_metrics(self) -> dict[str, float]:
        """Its own figures (perf/inference_restarts, ...): the actors' restarts counted so far."""
        ...

    def close(self) -> None: ...
