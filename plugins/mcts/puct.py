"""One PUCT search over array trees, for a batch of roots; how leaves get evaluated is a part it is given.

Each call searches a batch of roots (one per game), each in a tree slot: the one whose last root
it follows from, its subtree under the moves since kept (`reuse_tree`, see reuse.py), else a free
one. The caller need not keep games in order: a match passes whichever games are its player's turn.

The loop: select leaves (`tree.select_leaves`: PUCT, pending visits under virtual loss where the
evaluation lets leaves of one tree wait together) → hand them to the evaluation part → expand and
back up what it answers. With `evaluation.InProcess`, one leaf per tree per round, all trees in one
batch; with `evaluation.Pipelined`, batches in flight to Ray actors while the next are selected.
With a pipeline of batch 1 and one leaf in flight, the two agree visit for visit.

Invariants (tests/mcts): a root's visits plus its pending visits never pass the target; pending
visits never go below zero and are all taken back when a search ends, also by an exception (what is
still in flight is cancelled); noise only at start nodes; an answer of another size fails the search.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from framework.errors import ConfigError
from framework.schedules import final_value
from framework_plugins.boardgames import SearchRequest, SearchResult

from . import leaves as leaf_kernels
from . import roots as root_kernels
from . import steps
from . import tree as kernels
from .answers import Gathered, checked
from .batching import Evaluated, inference_metrics
from .evaluation import InProcess
from .game_calls import entry_point, game_kernels
from .leaves import Leaves
from .pipeline import GroupedWalk
from .reuse import assign_slots, keep_subtrees
from .tree import EXPANDED, SearchParams, Tree

if TYPE_CHECKING:
    from framework_plugins.boardgames import BoardGame, BoardState

    from .config import SequentialConfig
    from .evaluation import LeafEvaluation

#: How long a search waits for an answer when it can select nothing more (it wakes at the first).
IDLE_WAIT_S = 0.05


class PuctSearch:
    """PUCT with Dirichlet noise at the start node, subtree reuse, and leaves evaluated by a part."""

    def __init__(
        self, cfg: SequentialConfig, *, game: BoardGame, evaluation: LeafEvaluation, seed: int
    ) -> None:
        self.cfg, self.game, self.evaluation = cfg, game, evaluation
        self.rng = np.random.default_rng(seed)
        self._num_simulations = round(final_value(cfg.num_simulations, name="search.num_simulations"))
        self._dirichlet_epsilon = final_value(cfg.dirichlet_epsilon, name="search.dirichlet_epsilon")
        # Numbers of fixed types: the compiled kernels are typed once.
        self.params = SearchParams(
            c_puct=float(cfg.c_puct),
            fpu_value=0.0 if cfg.fpu_value is None else float(cfg.fpu_value),
            fpu_from_parent=cfg.fpu_value is None,
            fpu_reduction=float(cfg.fpu_reduction),
            virtual_loss=float(evaluation.virtual_loss),
            detect_wins=bool(cfg.detect_wins),
            leaves_per_tree=int(evaluation.leaves_per_tree),
            forced_blocks=bool(cfg.forced_blocks),
            forced_wins=bool(cfg.forced_wins),
            draw_contempt=float(cfg.draw_contempt),
            gumbel=cfg.root == "gumbel",
            c_visit=float(cfg.gumbel_c_visit),
            c_scale=float(cfg.gumbel_c_scale),
        )
        self.kernels = game_kernels(game)
        if cfg.forced_wins and not self.kernels.forced_win:
            raise ConfigError(
                f"search.forced_wins=true needs a game with a forced_win solver, and {game.name} has none: "
                "set search.forced_wins=false"
            )
        self.tree: Tree | None = None
        self._slots: list[tuple[int, ...] | None] = []
        """The moves of each tree slot's root (None: a free slot)."""
        self._leaves: Leaves | None = None
        self._compiled: dict[str, Callable[..., Any]] = {}
        self._gumbel = root_kernels.GumbelSchedules(int(cfg.gumbel_considered))
        self._gathered = Gathered(game.n_actions)
        self._none = self._gathered.none
        """No answer: what the first turn of a search finishes."""
        self.simulations = 0
        """Simulations run since the search was built (for sims/s)."""
        self.search_seconds = 0.0
        self._sims_mark = 0
        self.clamped = 0
        """Pending visits that were already 0 when taken back (a bookkeeping error; stays 0)."""
        self._deadline: float | None = None
        """The search under way ends at this time.perf_counter() (None: at its simulations)."""
        self.debug_hook: Callable[[PuctSearch, Tree], None] | None = None
        """Called at every turn of the loop (tests check the invariants with it)."""
        self.walk: GroupedWalk | None = None
        """With the network in this process: the loop over the run's threads and groups."""
        self.tree_threads = 1
        """The threads the tree kernels run on (the pipelined search's stay on one)."""
        if isinstance(evaluation, InProcess):
            groups = cfg.pipeline_groups or (2 if evaluation.device.startswith("cuda") else 1)
            self.walk = GroupedWalk(evaluation, threads=evaluation.threads, groups=groups)
            self.tree_threads = self.walk.threads

    @property
    def num_simulations(self) -> int:
        """Simulations per root of a request that gives none (the schedule's last value, where
        `search.num_simulations` is one: a self-play runner asks for its schedule's own)."""
        return self._num_simulations

    @property
    def dirichlet_epsilon(self) -> float:
        """Weight of the start node's noise in a request that gives none."""
        return self._dirichlet_epsilon

    def search(self, roots: Sequence[BoardState], request: SearchRequest | None = None) -> SearchResult:
        """The search of `roots` that `request` asks for (see SearchRequest); with a deadline, no
        leaf is selected after it once every root has a visited move, and the search ends as the
        leaves in flight are answered."""
        request = request or SearchRequest()
        started, before = time.perf_counter(), self.simulations
        self._deadline = request.deadline
        n = len(roots)
        noise = np.broadcast_to(np.asarray(request.add_noise, dtype=bool), (n,))
        targets = np.full(n, self.num_simulations, dtype=np.int64)
        if request.simulations is not None:
            targets[:] = np.maximum(np.asarray(request.simulations, dtype=np.int64), 1)
        epsilon = (
            self.dirichlet_epsilon if request.dirichlet_epsilon is None else float(request.dirichlet_epsilon)
        )
        try:
            visits, values, policies, chosen, version = self._search(roots, noise, targets, epsilon)
        finally:
            self._deadline = None
            self.search_seconds += time.perf_counter() - started
        return SearchResult(visits, values, policies, chosen, version, self.simulations - before)

    def warm_up(self, root: BoardState) -> None:
        self.search([root], SearchRequest(simulations=2))

    def interrupt(self) -> None:
        """End the search under way (from another thread) as its deadline would: at once, once every
        root has a visited move. A search that starts later is not affected."""
        self._deadline = 0.0

    def perf_metrics(self) -> dict[str, float]:
        """The tuning figures (perf/search_sims_per_s, batch_fill, tree_threads, …) since the last call."""
        sims, self._sims_mark = self.simulations - self._sims_mark, self.simulations
        seconds, self.search_seconds = self.search_seconds, 0.0
        metrics = inference_metrics(self.evaluation.take_stats(), sims, seconds)
        walk = self.walk
        if not sims:
            return metrics
        if not isinstance(self.evaluation, InProcess):  # pending visits: a pipelined evaluation's
            metrics["perf/pending_clamped"] = float(self.clamped)  # over the search's life
        metrics["perf/tree_threads"] = float(self.tree_threads)
        if walk is not None:
            evaluation = self.evaluation
            on_gpu = isinstance(evaluation, InProcess) and evaluation.device.startswith("cuda")
            metrics.update(walk.take_metrics(on_gpu=on_gpu))
        return metrics

    def close(self) -> None:
        """Drop the trees (the evaluation part's work in flight with them)."""
        if self.evaluation.pending():
            self.evaluation.abandon()
        if self.walk is not None:
            self.walk.close()
        self.tree, self._leaves, self._slots = None, None, []

    # -- the steps of a search ---------------------------------------------------------------------

    def _search(
        self, roots: Sequence[BoardState], noise: np.ndarray, targets: np.ndarray, epsilon: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
        """(visits, values, policy targets, chosen moves, the weights' version it began with)."""
        if not roots:
            empty = np.zeros((0, self.game.n_actions), dtype=np.float32)
            return empty, np.zeros(0, dtype=np.float32), empty.copy(), np.zeros(0, dtype=np.int64), 0
        histories = [tuple(map(int, root.moves)) for root in roots]
        for i, (root, moves) in enumerate(zip(roots, histories, strict=True)):
            if len(moves) >= self.game.n_actions or root.done:
                raise ValueError(f"search: root {i} is a finished game ({len(moves)} moves)")
        version = self.evaluation.begin()
        tree = self._tree_for(len(roots), int(targets.max()))
        slots = assign_slots(self._slots, histories, reuse_tree=self.cfg.reuse_tree)
        self._place_roots(tree, slots, roots, histories)
        active = np.zeros(tree.n_trees, dtype=np.bool_)
        active[slots] = True
        tree.target[slots] = targets
        self._expand_roots(tree, slots)
        if self.params.gumbel:
            self._gumbel.draw(tree, slots, noise, self.rng)
        elif noise.any():
            self._add_noise(tree, slots[noise], epsilon)
        self._simulate(tree, active)
        values = (-tree.value_sum[:, 0] / np.maximum(tree.visits[:, 0], 1))[slots].astype(np.float32)
        counts = kernels.root_child_visits(tree)[slots]
        policies, chosen = self._results(tree, slots, counts)
        return counts, values, policies, chosen, version

    def _results(self, tree: Tree, slots: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(policy targets, chosen moves) of the searched roots."""
        if not self.params.gumbel:
            totals = counts.sum(axis=1, keepdims=True)
            return counts / np.maximum(totals, 1), np.full(len(slots), -1, dtype=np.int64)
        policies = np.zeros_like(counts)
        chosen = np.empty(len(slots), dtype=np.int64)
        root_kernels.gumbel_results(len(slots), self.tree_threads, tree, self.params, slots, policies, chosen)
        return policies, chosen

    def _tree_for(self, n: int, simulations: int) -> Tree:
        capacity = simulations + 2
        tree = self.tree
        if tree is None:
            tree = kernels.new_tree(n, capacity, self.game.n_actions)
        elif tree.n_trees < n or tree.capacity < capacity:
            tree = kernels.grown(tree, capacity, n)
        self._slots += [None] * (tree.n_trees - len(self._slots))
        self.tree = tree
        return tree

    def _place_roots(
        self, tree: Tree, slots: np.ndarray, searched: Sequence[BoardState], histories: list[tuple[int, ...]]
    ) -> None:
        """Each tree's root becomes its root of this call: the kept subtree where the root follows
        from the tree's last one (`search.reuse_tree`), else a new tree."""
        # A Gumbel root's schedule counts its moves' visits from 0: its searches start afresh.
        reuse = self.cfg.reuse_tree and not self.params.gumbel
        # Values under contempt are the last root's player's: kept where the player is the same.
        fresh, placed = keep_subtrees(
            tree, slots, self._slots, histories, reuse=reuse, same_player=bool(self.params.draw_contempt)
        )
        if not placed.any():
            return
        which = np.flatnonzero(placed).tolist()
        root_kernels.place_roots(
            tree,
            slots[placed],
            fresh[placed],
            np.stack([np.asarray(searched[j].board, dtype=np.int8) for j in which]),
            np.array([searched[j].to_play for j in which], dtype=np.int8),
            np.array([len(histories[j]) for j in which], dtype=np.int32),
            np.array([histories[j][-1] if histories[j] else -1 for j in which], dtype=np.int32),
        )

    def _expand_roots(self, tree: Tree, slots: np.ndarray) -> None:
        """The searched roots not expanded yet (new trees), with the network's answers for them."""
        todo = slots[tree.state[slots, 0] != EXPANDED]
        if not len(todo):
            return
        game = self.game
        planes = np.empty((len(todo), game.n_planes, *game.board_shape), dtype=np.float32)
        root_kernels.encode_roots(tree, self.kernels, todo, planes)
        answer = checked(self.evaluation.evaluate(planes), self.game.n_actions)
        assert answer.draws is not None  # checked: zeros from a network without draws
        logits, values, draws = answer.logits, answer.values, answer.draws
        root_kernels.expand_roots(
            len(todo), self.tree_threads, tree, self.params, self.kernels, todo, logits, values, draws
        )

    def _add_noise(self, tree: Tree, slots: np.ndarray, epsilon: float) -> None:
        """Dirichlet noise into each start node's priors, once per start node."""
        for b in map(int, slots):
            if tree.noised[b]:
                continue
            n_legal = int(np.count_nonzero(tree.root_board[b] == 0))
            noise = self.rng.dirichlet(np.full(n_legal, self.cfg.dirichlet_alpha))
            steps.add_noise(tree, b, noise, epsilon)
            tree.noised[b] = True

    def _simulate(self, tree: Tree, active: np.ndarray) -> None:
        if self.walk is not None:
            self._walk(self.walk, tree, active)
            return
        evaluation = self.evaluation
        max_pending = evaluation.max_pending(int(active.sum()))
        leaves = self._leaves_for(max_pending, tree.n_trees)
        leaf_kernels.free_all(leaves)
        params, game = self.params, self.kernels
        slots, logits, values, draws = self._none
        step = self._compile(
            "step",
            leaf_kernels.finish_and_select,
            tree,
            params,
            game,
            leaves,
            active,
            1,
            slots,
            logits,
            values,
            draws,
        )
        try:
            while True:
                budget = max_pending - evaluation.pending()
                deadline = self._deadline
                if deadline is not None and time.perf_counter() >= deadline and _visited(tree, active):
                    if not evaluation.pending() and not len(slots):
                        break
                    budget = 0  # time is up: the answers in hand and in flight are taken in, no more
                k, simulated, unfinished, clamped = step(
                    tree, params, game, leaves, active, budget, slots, logits, values, draws
                )
                self.simulations += simulated
                self.clamped += clamped
                if not unfinished:  # every tree at its target: nothing was selected, nothing waits
                    break
                if self.debug_hook is not None:
                    self.debug_hook(self, tree)
                answers = evaluation.exchange(leaves.taken[:k], leaves.planes[:k], IDLE_WAIT_S)
                slots, logits, values, draws = self._answered(answers, tree, leaves)
            if evaluation.pending():
                raise RuntimeError(f"search ended with {evaluation.pending()} leaves still pending")
        except BaseException:
            waiting = evaluation.abandon()
            if waiting:
                self.clamped += leaf_kernels.release_leaves(
                    tree, leaves, np.concatenate(waiting).astype(np.int64)
                )
            raise

    def _walk(self, walk: GroupedWalk, tree: Tree, active: np.ndarray) -> None:
        """The in-process loop: a leaf per tree at a time (slot b is tree b's), on the run's threads."""
        leaves = self._leaves_for(tree.n_trees, tree.n_trees)

        def tally(simulated: int, clamped: int) -> None:
            self.simulations += simulated
            self.clamped += clamped

        hook = self.debug_hook
        walk.run(
            tree,
            leaves,
            active,
            params=self.params,
            game=self.kernels,
            deadline=lambda: self._deadline,
            answered=lambda answers: self._answered(answers, tree, leaves),
            none=self._none,
            tally=tally,
            hook=None if hook is None else lambda t: hook(self, t),
        )

    def _answered(
        self, answers: list[Evaluated], tree: Tree, leaves: Leaves
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The answers as one (slots, logits, values, draws), checked; a bad one fails the search, its
        leaves and the others' given up. Draws are zeros from a network without them."""
        try:
            return self._gathered(answers)
        except RuntimeError:
            given_up = np.concatenate([a.mapping for a in answers]).astype(np.int64)
            self.clamped += leaf_kernels.release_leaves(tree, leaves, given_up)
            raise

    def _leaves_for(self, n: int, n_trees: int) -> Leaves:
        self._leaves = leaf_kernels.at_least(self._leaves, n, n_trees, self.game)
        return self._leaves

    def _compile(self, name: str, dispatcher: Any, *args: Any) -> Callable[..., Any]:
        compiled = self._compiled.get(name)
        if compiled is None:
            compiled = self._compiled[name] = entry_point(dispatcher, *args)
        return compiled


def _visited(tree: Tree, active: np.ndarray) -> bool:
    """Whether every searched root has a visited move (a root counts its own first visit)."""
    return bool((tree.visits[active, 0] > 1).all())
