"""The in-process search on the run's threads and in pipelined groups (plugins/mcts/walk.py,
pipeline.py): the same visits on any number of threads, the network busy with one group while
another's trees are walked, and nothing pending left behind by a failure, a deadline or an interrupt."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numba
import numpy as np
import pytest

from framework_plugins.boardgames import SearchRequest
from framework_plugins.gomoku.rules import GameState, Gomoku
from framework_plugins.mcts.config import SequentialConfig
from framework_plugins.mcts.engines import local_search
from framework_plugins.mcts.puct import PuctSearch
from framework_plugins.mcts.threads import MIN_TREES_PER_THREAD, usable_threads

GAME = Gomoku(9, 5)
OPENINGS = [[], [40], [40, 41], [30, 40, 50], [10, 20], [80], [0, 1, 2, 3], [44, 36]]


def roots(n: int) -> list[GameState]:
    return [GameState.from_moves(GAME, OPENINGS[i % len(OPENINGS)]) for i in range(n)]


class Shaped:
    """A deterministic evaluator whose answer for a position depends on that position alone."""

    def __init__(self) -> None:
        self.calls = 0
        self.threads: set[str] = set()

    def __call__(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        self.calls += 1
        self.threads.add(threading.current_thread().name)
        n = len(planes)
        flat = planes.reshape(n, planes.shape[1], -1)
        logits = flat[:, 0] * 0.7 - flat[:, 1] * 0.4 + np.sin(np.arange(flat.shape[2]))[None]
        values = np.tanh(0.05 * flat[:, 0].sum(1) - 0.04 * flat[:, 1].sum(1))
        return logits.astype(np.float32), values.astype(np.float32)


def engine(
    factory: Callable[[], Any] = Shaped,
    *,
    threads: int = 1,
    groups: int | None = None,
    seed: int = 0,
    **cfg: Any,
) -> PuctSearch:
    config = SequentialConfig(pipeline_groups=groups, **cfg)
    return local_search(config, game=GAME, evaluator_factory=factory, seed=seed, threads=threads)


def played(n: int, moves: int, threads: int, groups: int | None, **cfg: Any) -> list[tuple[np.ndarray, ...]]:
    """Visits, values and policy targets of `moves` searches of n games (noise on, the most visited
    move played each time, trees kept)."""
    eng = engine(threads=threads, groups=groups, seed=5, **cfg)
    states, out = roots(n), []
    try:
        for _ in range(moves):
            found = eng.search(states, SearchRequest(add_noise=True))
            counts = found.visits
            out.append((counts, found.values.copy(), found.policy_targets.copy()))
            for i, state in enumerate(states):
                state.play(int(counts[i].argmax()))
    finally:
        eng.close()
    return out


@pytest.mark.parametrize("root", ["puct", "gumbel"])
def test_the_same_seed_gives_the_same_visits_on_any_number_of_threads_and_groups(root: str) -> None:
    expected = played(16, 3, threads=1, groups=1, num_simulations=60, root=root)
    for threads, groups in [(2, 1), (4, 1), (2, 2), (1, 3), (4, 5)]:
        got = played(16, 3, threads=threads, groups=groups, num_simulations=60, root=root)
        for move, (a, b) in enumerate(zip(expected, got, strict=True)):
            for name, x, y in zip(("visits", "values", "policies"), a, b, strict=True):
                np.testing.assert_array_equal(
                    x, y, err_msg=f"{name}, move {move}, {threads} threads x {groups}"
                )


def test_a_network_gives_the_same_visits_on_one_thread_and_on_several() -> None:
    """The batches a network sees are the same on any number of threads, so are its answers."""
    import torch

    from framework_plugins.alphazero.network import PolicyValueNet, evaluator_for

    torch.manual_seed(0)
    net = PolicyValueNet(board_size=9, in_planes=GAME.n_planes, blocks=1, channels=16).eval()
    visits = []
    for threads in (1, 2):
        eng = engine(lambda: evaluator_for(net, "cpu", "torch"), threads=threads, num_simulations=50)
        try:
            visits.append(eng.search(roots(12), SearchRequest(add_noise=True)).visits)
            assert eng.perf_metrics()["perf/tree_threads"] == usable_threads(threads)
        finally:
            eng.close()
    np.testing.assert_array_equal(visits[0], visits[1])


def test_threads_are_the_run_s_up_to_numba_s_pool() -> None:
    most = numba.config.NUMBA_NUM_THREADS  # type: ignore[attr-defined]
    assert usable_threads(1) == 1
    assert usable_threads(most + 7) == most
    assert usable_threads(0) == most


def test_the_network_evaluates_one_group_while_this_thread_walks_another() -> None:
    """With two groups, a network call waits until a walk happens meanwhile (it would wait for its
    timeout in a loop that walks and evaluates in turn)."""
    walked = threading.Event()
    overlapped = []

    class Slow(Shaped):
        def __call__(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            if threading.current_thread() is not threading.main_thread():  # not the roots' expansion
                walked.clear()
                overlapped.append(walked.wait(timeout=10))
            return super().__call__(planes)

    evaluator = Slow()
    eng = engine(lambda: evaluator, groups=2, num_simulations=12)
    eng.debug_hook = lambda search, tree: walked.set()
    try:
        counts = eng.search(roots(8)).visits
    finally:
        eng.close()
    np.testing.assert_array_equal(counts.sum(1), 12)
    # The leaves in the network's thread; the roots, expanded before the walk, in this one.
    assert evaluator.threads == {"network_0", threading.current_thread().name}
    # Every call but the last ones (no group left to walk) saw a walk of the other group.
    assert sum(overlapped) >= len(overlapped) - 2 and len(overlapped) > 10, overlapped


def test_one_group_evaluates_in_the_searching_thread() -> None:
    evaluator = Shaped()
    eng = engine(lambda: evaluator, groups=1, num_simulations=12)
    try:
        eng.search(roots(8))
    finally:
        eng.close()
    assert evaluator.threads == {threading.current_thread().name}


@pytest.mark.parametrize(("threads", "groups"), [(1, 1), (2, 1), (2, 3)])
def test_a_failing_network_leaves_nothing_pending_and_the_search_goes_on(threads: int, groups: int) -> None:
    class Failing(Shaped):
        fail_at = 5

        def __call__(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            if self.calls == self.fail_at:
                self.calls += 1
                raise RuntimeError("the network failed")
            return super().__call__(planes)

    eng = engine(Failing, threads=threads, groups=groups, num_simulations=40)
    try:
        with pytest.raises(RuntimeError, match="the network failed"):
            eng.search(roots(12))
        assert eng.tree is not None
        assert (eng.tree.pending_visits == 0).all()
        assert eng.clamped == 0
        counts = eng.search(roots(12)).visits
        np.testing.assert_array_equal(counts.sum(1), 40)
        assert (eng.tree.pending_visits == 0).all() and eng.clamped == 0
    finally:
        eng.close()


@pytest.mark.parametrize("groups", [1, 2])
def test_invariants_hold_at_every_turn_and_an_interruption_leaves_nothing_pending(groups: int) -> None:
    turns = []

    def check(search: PuctSearch, tree: Any) -> None:
        turns.append(1)
        assert (tree.pending_visits >= 0).all()
        assert (tree.pending_visits[:, 0] <= 1).all()  # one leaf a tree at most
        assert (tree.visits[:, 0] - 1 + tree.pending_visits[:, 0] <= tree.target).all()
        if len(turns) == 9:
            raise KeyboardInterrupt("injected mid-search")

    eng = engine(threads=2, groups=groups, num_simulations=30)
    eng.debug_hook = check
    try:
        with pytest.raises(KeyboardInterrupt, match="injected"):
            eng.search(roots(16))
        assert eng.tree is not None and (eng.tree.pending_visits == 0).all()
        eng.debug_hook = None
        np.testing.assert_array_equal(eng.search(roots(16)).visits.sum(1), 30)
    finally:
        eng.close()


@pytest.mark.parametrize(("n_roots", "groups"), [(8, 1), (8, 2), (4 * MIN_TREES_PER_THREAD, 1), (64, 2)])
def test_an_interrupt_from_another_thread_ends_the_search_with_every_root_visited(
    n_roots: int, groups: int
) -> None:
    """A few roots walk on the calling thread; enough of them on 2 threads take the parallel turn,
    whose turn without selecting once left the last turn's leaves marked as taken: they went to the
    network again and again, and the search never ended."""
    started = threading.Event()

    class Slow(Shaped):
        def __call__(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            if self.calls == 20:
                started.set()
            return super().__call__(planes)

    eng = engine(Slow, threads=2, groups=groups, num_simulations=100_000)
    stopper = threading.Thread(target=lambda: started.wait(30) and eng.interrupt())
    stopper.start()
    found: list[np.ndarray] = []
    searching = threading.Thread(target=lambda: found.append(eng.search(roots(n_roots)).visits), daemon=True)
    try:
        searching.start()
        searching.join(120)
        assert not searching.is_alive(), "the interrupted search never ended"
        stopper.join()
        assert started.is_set() and found
        counts = found[0]
        assert (counts.sum(1) >= 1).all() and (counts.sum(1) < 100_000).all()
        assert eng.tree is not None and (eng.tree.pending_visits == 0).all()
        assert eng.clamped == 0  # no answer came twice for a leaf
    finally:
        if not searching.is_alive():
            eng.close()


def test_perf_metrics_say_the_threads_groups_and_the_network_s_share() -> None:
    eng = engine(threads=2, groups=2, num_simulations=20)
    try:
        assert eng.perf_metrics() == {}
        eng.search(roots(16))
        metrics = eng.perf_metrics()
        assert metrics["perf/tree_threads"] == usable_threads(2)
        assert metrics["perf/pipeline_groups"] == 2
        assert 0 < metrics["perf/network_busy"] <= 1
        assert "perf/gpu_busy" not in metrics  # the network is on the CPU
        assert eng.perf_metrics() == {}
    finally:
        eng.close()


def test_bad_pipeline_groups_are_refused_naming_the_key() -> None:
    from framework.errors import ConfigError

    with pytest.raises(ConfigError, match=r"search.pipeline_groups=0 must be >= 1, or null"):
        engine(groups=0)
