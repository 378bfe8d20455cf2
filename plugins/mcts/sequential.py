"""`search=sequential`: PUCT over array trees, one leaf per game per simulation, evaluated in one batch.

Each call searches a batch of roots (one per game); the leaves of all of them go to the
evaluator together, so B games cost one network call per simulation. Each root is searched in a
tree slot: the slot whose last root it follows from by the moves played since (up to
MAX_MOVES_SINCE), whose subtree under those moves is kept (`reuse_tree`), else a free slot.
The caller need not keep games in order: a match passes whichever games are its player's turn.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from framework.errors import ConfigError

from . import tree as kernels
from .config import SequentialConfig
from .tree import EXPANDED, STATE, Forest, entry_point

if TYPE_CHECKING:
    from framework.contracts import BoardGame, BoardState, Evaluator, SearchEngine


#: How many moves a root may be past its slot's last root for the slot's subtree to be found.
MAX_MOVES_SINCE = 8


class SequentialEngine:
    """PUCT with Dirichlet noise at the start node, subtree reuse and batched leaf evaluation."""

    Config: ClassVar[type] = SequentialConfig

    def __init__(
        self,
        cfg: SequentialConfig,
        *,
        game: BoardGame,
        evaluator_factory: Callable[[], Evaluator],
        seed: int,
    ) -> None:
        _validate(cfg)
        self.cfg = cfg
        self.game = game
        self.evaluator_factory = evaluator_factory
        self.rng = np.random.default_rng(seed)
        self.num_simulations = cfg.num_simulations
        self._evaluator: Evaluator | None = None
        self._forest: Forest | None = None
        self._slots: list[tuple[int, ...] | None] = []
        """The moves of each tree slot's root (None: a free slot)."""
        self._params = search_params(cfg, virtual_loss=0.0)
        self._kernels = kernels.kernel_addresses(game)
        self._last_values = np.zeros(0, dtype=np.float32)
        self.simulations = 0
        """Simulations run since the engine was built (for sims/s)."""

    @property
    def root_values(self) -> np.ndarray:
        """The last searched roots' values, from the view of their player to move, [B]."""
        return self._last_values

    def search(self, roots: Sequence[BoardState], *, add_noise: bool = False) -> np.ndarray:
        """Visit counts [len(roots), n_actions] of each root's moves after the search."""
        if not roots:
            self._last_values = np.zeros(0, dtype=np.float32)
            return np.zeros((0, self.game.n_actions), dtype=np.float32)
        histories = [tuple(int(m) for m in root.moves) for root in roots]
        for i, (root, moves) in enumerate(zip(roots, histories, strict=True)):
            if len(moves) >= self.game.n_actions or getattr(root, "done", False):
                raise ValueError(f"search: root {i} is a finished game ({len(moves)} moves)")
        forest = self._forest_for(len(roots))
        slots = self._assign_slots(histories)
        for root, moves, slot in zip(roots, histories, slots, strict=True):
            self._place_root(forest, int(slot), root, moves)
        active = np.zeros(forest.n_trees, dtype=np.bool_)
        active[slots] = True
        self._expand_roots(forest, active)
        if add_noise:
            self._add_noise(forest, active)
        self._simulate(forest, active)
        self._last_values = forest.root_values()[slots].astype(np.float32)
        return forest.root_visits()[slots]

    def close(self) -> None:
        """Drop the trees and the evaluator (and the network it holds)."""
        self._forest = None
        self._evaluator = None
        self._slots = []

    # -- the steps of a search ---------------------------------------------------------------------

    def _forest_for(self, n: int) -> Forest:
        capacity = self.num_simulations + 2
        forest = self._forest
        if forest is None:
            forest = Forest(n, capacity, self.game.n_actions)
        elif forest.n_trees < n or forest.capacity < capacity:
            forest = forest.grown(capacity, n)
        self._slots += [None] * (forest.n_trees - len(self._slots))
        self._forest = forest
        return forest

    def _assign_slots(self, histories: list[tuple[int, ...]]) -> np.ndarray:
        """A distinct tree slot per root: the one its moves follow from, else a free or stale one."""
        slots = np.full(len(histories), -1, dtype=np.int64)
        taken = np.zeros(len(self._slots), dtype=bool)
        if self.cfg.reuse_tree:
            # Games with the same history (the empty board, a shared opening) each keep their own tree.
            by_history: dict[tuple[int, ...], list[int]] = {}
            for s, h in enumerate(self._slots):
                if h is not None:
                    by_history.setdefault(h, []).append(s)
            for i, moves in enumerate(histories):
                for since in range(min(len(moves), MAX_MOVES_SINCE) + 1):
                    mine = [s for s in by_history.get(moves[: len(moves) - since], ()) if not taken[s]]
                    if mine:
                        slots[i], taken[mine[0]] = mine[0], True
                        break
        # Free slots first, then those this call did not match (their games may have ended).
        spare = sorted(np.flatnonzero(~taken), key=lambda s: self._slots[s] is not None)
        for j in np.flatnonzero(slots < 0):
            free = int(spare.pop(0))
            slots[j] = free
            self._slots[free] = None
        return slots

    def _place_root(self, forest: Forest, i: int, root: BoardState, moves: tuple[int, ...]) -> None:
        """Tree i's root becomes `root`: the kept subtree when it follows from the last one."""
        last = self._slots[i]
        if self.cfg.reuse_tree and last is not None and moves[: len(last)] == last:
            extra = np.array(moves[len(last) :], dtype=np.int64)
            node = kernels.descend(i, forest.node_i, forest.children, extra)
            if node == 0:
                return
            if node > 0:
                kernels.reroot(
                    i,
                    node,
                    forest.node_i,
                    forest.value_sum,
                    forest.terminal_value,
                    forest.children,
                    forest.prior,
                    forest.n_nodes,
                )
                forest.set_root(i, root.board, int(root.to_play), len(moves), moves[-1])
                self._slots[i] = moves
                return
        forest.reset(i, np.asarray(root.board), int(root.to_play), len(moves), moves[-1] if moves else -1)
        self._slots[i] = moves

    def _evaluate(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self._evaluator is None:
            self._evaluator = self.evaluator_factory()
        logits, values = self._evaluator(planes)
        if len(logits) != len(planes) or len(values) != len(planes):
            raise RuntimeError(
                f"the evaluator returned {len(logits)} policies and {len(values)} values "
                f"for {len(planes)} positions"
            )
        return np.asarray(logits, dtype=np.float32), np.asarray(values, dtype=np.float32)

    def _expand_roots(self, forest: Forest, active: np.ndarray) -> None:
        todo = [int(b) for b in np.flatnonzero(active) if forest.node_i[b, 0, STATE] != EXPANDED]
        if not todo:
            return
        game = self.game
        planes = np.empty((len(todo), game.n_planes, *game.board_shape), dtype=np.float32)
        for j, b in enumerate(todo):
            kernels.encode_root(
                self._kernels,
                forest.root_board[b],
                int(forest.root_player[b]),
                int(forest.root_last[b]),
                game.params,
                planes[j],
            )
        logits, values = self._evaluate(planes)
        path = np.zeros(1, dtype=np.int64)
        for j, b in enumerate(todo):
            kernels.expand(
                b, 0, forest.node_i, forest.children, forest.prior, forest.root_board[b], logits[j]
            )
            kernels.backup(b, forest.node_i, forest.value_sum, path, 0, -float(values[j]))

    def _add_noise(self, forest: Forest, active: np.ndarray) -> None:
        """Dirichlet noise into each start node's priors, once per start node."""
        cfg = self.cfg
        for b in map(int, np.flatnonzero(active)):
            if forest.noised[b]:
                continue
            n_legal = int(np.count_nonzero(forest.root_board[b] == 0))
            noise = self.rng.dirichlet(np.full(n_legal, cfg.dirichlet_alpha))
            kernels.add_noise(
                b, forest.node_i, forest.prior, forest.root_board[b], noise, cfg.dirichlet_epsilon
            )
            forest.noised[b] = True

    def _tree_args(self, forest: Forest) -> tuple[np.ndarray, ...]:
        """The arguments of the selection kernels (select_leaf's) that describe the trees and the game."""
        return (
            forest.node_i,
            forest.value_sum,
            forest.terminal_value,
            forest.children,
            forest.prior,
            forest.n_nodes,
            forest.root_board,
            forest.root_player,
            forest.root_moves,
            forest.root_last,
            self._params,
            self.game.params,
            self._kernels,
        )

    def _simulate(self, forest: Forest, active: np.ndarray) -> None:
        game = self.game
        n_trees, n_actions = forest.n_trees, game.n_actions
        boards = np.empty((n_trees, n_actions), dtype=np.int8)
        paths = np.zeros((n_trees, n_actions + 2), dtype=np.int64)
        depths = np.zeros(n_trees, dtype=np.int64)
        planes = np.empty((n_trees, game.n_planes, *game.board_shape), dtype=np.float32)
        pending_b = np.zeros(n_trees, dtype=np.int64)
        select_args = (
            active,
            *self._tree_args(forest),
            boards,
            paths,
            depths,
            planes,
            pending_b,
            self.num_simulations,
        )
        select = entry_point(kernels.select_batch, *select_args)
        expand: Callable[..., None] | None = None
        while True:
            k, n_active = select(*select_args)
            if not n_active:
                return
            self.simulations += n_active
            if k:
                logits, values = self._evaluate(planes[:k])
                expand_args = (
                    k,
                    pending_b,
                    forest.node_i,
                    forest.value_sum,
                    forest.children,
                    forest.prior,
                    boards,
                    paths,
                    depths,
                    logits,
                    values,
                )
                if expand is None:
                    expand = entry_point(kernels.expand_batch, *expand_args)
                expand(*expand_args)


def uniform_evaluator(game: BoardGame) -> Callable[[], Evaluator]:
    """A factory of the evaluator with a uniform prior and a value of 0 (tree and rules alone)."""

    def make() -> Evaluator:
        def evaluate(planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            n = len(planes)
            return np.zeros((n, game.n_actions), dtype=np.float32), np.zeros(n, dtype=np.float32)

        return evaluate

    return make


def search_params(cfg: SequentialConfig, *, virtual_loss: float) -> np.ndarray:
    """The numbers the selection kernel reads (see tree.select_leaf)."""
    from_parent = cfg.fpu_value is None
    return np.array(
        [
            cfg.c_puct,
            cfg.fpu_reduction,
            virtual_loss,
            float(cfg.detect_wins),
            float(from_parent),
            0.0 if from_parent else float(cfg.fpu_value),  # type: ignore[arg-type]
        ],
        dtype=np.float64,
    )


def _validate(cfg: SequentialConfig) -> None:
    if cfg.num_simulations < 1:
        raise ConfigError(f"search.num_simulations={cfg.num_simulations} must be >= 1")
    if cfg.c_puct <= 0:
        raise ConfigError(f"search.c_puct={cfg.c_puct} must be > 0")
    if cfg.fpu_value is not None and not -1.0 <= cfg.fpu_value <= 1.0:
        raise ConfigError(
            f"search.fpu_value={cfg.fpu_value} must be in [-1, 1], or null (its parent's value)"
        )
    if cfg.dirichlet_alpha <= 0:
        raise ConfigError(f"search.dirichlet_alpha={cfg.dirichlet_alpha} must be > 0")
    if not 0.0 <= cfg.dirichlet_epsilon <= 1.0:
        raise ConfigError(f"search.dirichlet_epsilon={cfg.dirichlet_epsilon} must be in [0, 1]")


if TYPE_CHECKING:
    _search_contract: type[SearchEngine] = SequentialEngine
