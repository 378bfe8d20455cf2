"""Two-player board games as search reads them: positions, rules, opponents and evaluators."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from framework.contracts.env import EnvPlugin

if TYPE_CHECKING:
    import numpy as np


class BoardState(Protocol):
    """A position of a two-player board game, as a search engine reads it."""

    board: np.ndarray
    """The cells, flat: 0 empty, +1 the first player's stones, -1 the second's."""
    to_play: int
    """+1 or -1: whose move it is."""
    moves: Sequence[int]
    """The actions played so far, in order (a search engine matches a new root to its last tree by them)."""
    done: bool
    """Whether the game has ended (a finished game is no root to search)."""


class Evaluator(Protocol):
    """A batched policy-value function: planes [B, C, H, W] float32 → (policy logits [B, A], values [B]),
    or (logits, values, draws [B]) from a network that predicts the probability of a draw.

    Values are from the view of the player to move in each position, in [-1, 1]; draws in [0, 1].
    """

    def __call__(self, planes: np.ndarray) -> tuple[np.ndarray, ...]: ...


@runtime_checkable
class PortableEvaluator(Protocol):
    """An evaluator another process (a Ray actor) can rebuild and keep in step with this one.

    A service that evaluates elsewhere builds `portable()(device)` there and loads the weights
    published to it (`weights()` of a network, `load_weights` there).
    """

    def __call__(self, planes: np.ndarray) -> tuple[np.ndarray, ...]: ...
    def portable(self, backend: str | None = None) -> Callable[[str], PortableEvaluator]:
        """A picklable builder: `builder(device)` is the same function on `device` computed by
        `backend` (this evaluator's own by default; an unknown name is a ValueError naming the
        valid ones), its weights to be set by load_weights."""
        ...

    def weights(self) -> dict[str, np.ndarray]: ...
    def load_weights(self, weights: Mapping[str, np.ndarray]) -> None: ...


@runtime_checkable
class BoardGame(Protocol):
    """The rules of a two-player, alternating board game over flat action indices, for search.

    The hot loop of a search runs the game's C kernels (numba cfuncs over pointers: the board
    int8[n_actions], `params` int64[...], the planes float32[n_planes, H, W]):
    `apply_move(board, action, player, n_moves, params) -> 0 ongoing | 1 the mover won | 2 draw`,
    `winning_move(board, player, params) -> action or -1`, and
    `encode(board, player, last_move, params, out) -> 0`. A game may also be a `SolvingGame`.
    """

    @property
    def name(self) -> str: ...
    @property
    def spec(self) -> Mapping[str, Any]:
        """The rules' settings, as a checkpoint records them (a network trained on one game does not
        resume on another): JSON values."""
        ...

    @property
    def n_actions(self) -> int: ...
    @property
    def board_shape(self) -> tuple[int, int]: ...
    @property
    def n_planes(self) -> int: ...
    @property
    def params(self) -> np.ndarray: ...
    @property
    def apply_move(self) -> Any: ...
    @property
    def winning_move(self) -> Any: ...
    @property
    def encode(self) -> Any: ...
    @property
    def symmetry_index(self) -> np.ndarray:
        """[S, n_actions]: the board's symmetries; symmetry k maps a flat board b to b[..., symmetry_index[k]]
        (a policy over actions, or planes flattened over their cells)."""
        ...

    def new_state(self) -> Any: ...
    def state_from_planes(self, planes: np.ndarray) -> Any:
        """The position shown by input planes (what a gymnasium observation of the game holds)."""
        ...


@runtime_checkable
class SolvingGame(BoardGame, Protocol):
    """A board game with a solver: `forced_win(board, player, params) -> action or -1`, the first
    move of a win the opponent cannot stop (Gomoku's continuous fours), which `search.forced_wins`
    asks for."""

    @property
    def forced_win(self) -> Any: ...


class GameOpponent(Protocol):
    """A fixed player of a board game."""

    name: str

    def act(self, state: Any) -> int: ...


@runtime_checkable
class GameEnvPlugin(EnvPlugin, Protocol):
    """An env plugin of a board game: its rules for search-based agents, and its fixed opponents
    (those named in `eval_variants` among them) for their evaluation."""

    @property
    def game(self) -> BoardGame: ...
    @property
    def eval_variants(self) -> tuple[str, ...]: ...
    def opponent(self, name: str, *, seed: int) -> GameOpponent: ...
    def opening(self, rng: np.random.Generator) -> list[int]:
        """The moves of a random opening an evaluation's pair of games starts from (colours swapped
        between the two); [] for the game's start."""
        ...
