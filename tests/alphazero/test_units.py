"""AlphaZero's parts: replay under symmetries, self-play records, matches, the network's shapes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from framework_plugins.alphazero.arena import SearchPlayer
from framework_plugins.alphazero.config import AlphaZeroConfig
from framework_plugins.alphazero.learner import Learner
from framework_plugins.alphazero.matches import FixedPlayer, MatchResult, MatchStopped, play_match
from framework_plugins.alphazero.network import NetworkEvaluator, PolicyValueNet
from framework_plugins.alphazero.replay import PositionReplay
from framework_plugins.alphazero.selfplay import (
    MoveChoice,
    Openings,
    PlayoutCap,
    SelfPlayRunner,
    VectorizeRunner,
)
from framework_plugins.boardgames import SearchRequest
from framework_plugins.gomoku.opponents import make_opponent
from framework_plugins.gomoku.rules import GameState, Gomoku
from framework_plugins.mcts.config import SequentialConfig
from framework_plugins.mcts.engines import local_search, uniform_evaluator
from framework_plugins.mcts.puct import PuctSearch

GAME = Gomoku(6, 4)


def engine(sims: int = 16, seed: int = 0) -> PuctSearch:
    return local_search(
        SequentialConfig(num_simulations=sims),
        game=GAME,
        evaluator_factory=uniform_evaluator(GAME),
        seed=seed,
    )


def test_replay_samples_a_stone_and_its_policy_under_the_same_symmetry() -> None:
    replay = PositionReplay(10, (4, 6, 6), 36, GAME.symmetry_index)
    state = GAME.new_state()
    state.play(GAME.from_xy(1, 0))  # black at (1, 0); white to move
    planes = state.planes()
    policy = np.zeros(36, dtype=np.float32)
    policy[GAME.from_xy(1, 0)] = 1.0  # the policy's mass on the same cell as the stone
    replay.add(planes[None].astype(np.uint8), policy[None], np.array([0.5], dtype=np.float32))
    sampled, pi, z = replay.sample(64, np.random.default_rng(0))
    cells = {int(p[1].ravel().argmax()) for p in sampled}
    assert len(cells) > 1, "symmetries move the stone"
    for p, target in zip(sampled, pi, strict=True):
        assert int(p[1].ravel().argmax()) == int(target.argmax())  # the opponent's stone plane
        assert p[3].sum() == 0  # white to move: the side-to-move plane stays empty
    assert (z == 0.5).all()


def test_replay_is_circular_and_restores_oldest_first() -> None:
    replay = PositionReplay(3, (4, 6, 6), 36, GAME.symmetry_index)
    for v in range(5):
        replay.add(np.zeros((1, 4, 6, 6), np.uint8), np.zeros((1, 36), np.float32), np.array([v], np.float32))
    assert len(replay) == 3 and replay.added == 5
    state = replay.state_dict()
    assert state["value"].tolist() == [2.0, 3.0, 4.0]
    other = PositionReplay(3, (4, 6, 6), 36, GAME.symmetry_index)
    other.load_state_dict(state)
    assert sorted(other.value.tolist()) == [2.0, 3.0, 4.0]


def test_self_play_records_give_each_position_the_outcome_from_its_movers_view() -> None:
    """Games until one is won (a drawn one on the way scores every position 0): the winner's
    positions score 1, the loser's -1, alternating from the last move back."""
    for seed in range(20):
        runner = SelfPlayRunner(GAME, engine(), MoveChoice(1.0, 36), np.random.default_rng(seed), noise=True)
        finished = []
        while not finished:
            moves, finished = runner.step()
            assert moves == 1
        (record,) = finished
        z = record.outcomes()
        assert len(z) == len(record.policies) == len(record.planes)
        for pi in record.policies:
            assert pi.sum() == pytest.approx(1.0)
        if not record.winner:
            assert set(z) == {0.0}, z
            continue
        assert z[-1] == 1.0  # the last mover won
        assert set(z[::2]) == {z[0]} and set(z[1::2]) == {-z[0]}
        return
    raise AssertionError("20 games of self-play, none won")


def test_the_vectorize_runner_moves_in_every_game_and_restarts_finished_ones() -> None:
    runner = VectorizeRunner(
        GAME, engine(), MoveChoice(1.0, 36), np.random.default_rng(0), n_games=5, noise=False
    )
    games = 0
    for _ in range(40):
        moves, finished = runner.step()
        assert moves == 5
        games += len(finished)
        for record in finished:
            assert all(len(p) == 36 for p in record.policies)
    assert games >= 5
    assert all(not s.done for s in runner.states)


def test_playout_cap_randomisation_records_only_the_full_searches_made_with_noise() -> None:
    search_engine = engine(sims=24)
    calls: list[tuple[list[int], list[bool]]] = []
    search = search_engine.search

    def spy(roots: Any, request: SearchRequest) -> Any:
        assert isinstance(request.simulations, list) and isinstance(request.add_noise, list)
        calls.append((list(request.simulations), list(request.add_noise)))
        return search(roots, request)

    search_engine.search = spy  # type: ignore[method-assign]
    cap = PlayoutCap(full_fraction=0.25, fast_simulations=4)
    runner = VectorizeRunner(
        GAME, search_engine, MoveChoice(1.0, 4), np.random.default_rng(0), n_games=8, noise=True, cap=cap
    )
    moves, records = 0, []
    for _ in range(40):
        played, finished = runner.step()
        moves += played
        records += finished
    full = sum(s == 24 for sims, _ in calls for s in sims)
    assert 0.15 < full / moves < 0.35  # a quarter of the moves
    for sims, noise in calls:
        assert set(sims) <= {24, 4} and [s == 24 for s in sims] == noise  # noise on the full ones only
    recorded = sum(len(r) for r in records) + sum(len(r) for r in runner.records)
    assert recorded == full  # the fast searches' positions are not recorded
    for record in records:
        for pi in record.policies:
            assert pi.sum() == pytest.approx(1.0) and np.allclose(pi * 24, np.round(pi * 24), atol=1e-4)


def test_random_openings_start_their_share_of_games_and_are_not_recorded() -> None:
    rng = np.random.default_rng(3)
    pool = [GAME.random_opening(rng, 2) for _ in range(16)]
    runner = VectorizeRunner(
        GAME,
        engine(sims=4),
        MoveChoice(1.0, 36),
        np.random.default_rng(0),
        n_games=8,
        noise=True,
        openings=Openings(0.5, pool),
    )
    records = []
    while len(records) < 60:
        records += runner.step()[1]
    starts = []
    for record in records:
        first = record.planes[0]
        stones = [int(a) for a in np.flatnonzero(first[0].ravel() + first[1].ravel())]
        assert len(record) == record.moves  # every searched move recorded, the opening's none
        if stones:  # black's and white's stone, black to move: one of the pool's openings
            assert len(stones) == 2 and sorted(stones) in [sorted(o) for o in pool]
            assert record.players[0] == 1
        starts.append(bool(stones))
    assert 0.3 < np.mean(starts) < 0.7
    plain = VectorizeRunner(
        GAME, engine(sims=4), MoveChoice(1.0, 36), np.random.default_rng(0), n_games=8, noise=True
    )
    assert all(not s.moves for s in plain.states)


def test_a_search_player_beats_a_random_player_and_results_are_from_the_first_players_view() -> None:
    me = SearchPlayer("search", engine(sims=200), np.random.default_rng(0), temperature_moves=0)
    result = play_match(GAME, me, FixedPlayer(make_opponent("random", GAME, seed=1)), 6)
    assert result.games == 6
    assert result.wins >= 5
    flipped = play_match(GAME, FixedPlayer(make_opponent("random", GAME, seed=1)), me, 6)
    assert flipped.losses >= 5


def test_a_match_asked_to_stop_gives_up_within_a_turn() -> None:
    turns = []

    class Counting(FixedPlayer):
        def moves(self, states: list) -> list[int]:
            turns.append(len(states))
            return super().moves(states)

    random = make_opponent("random", GAME, seed=1)
    with pytest.raises(MatchStopped):
        play_match(GAME, Counting(random), Counting(random), 4, should_stop=lambda: len(turns) >= 3)
    assert len(turns) == 3  # asked before every turn: not one move after the answer changed
    # Never asked to stop, it plays to the end.
    assert play_match(GAME, Counting(random), Counting(random), 4, should_stop=lambda: False).games == 4


def test_match_result_metrics_and_a_finite_elo() -> None:
    result = MatchResult(wins=10, draws=0, losses=0)
    metrics = result.metrics("eval/x")
    assert metrics["eval/x/score"] == 1.0 and metrics["eval/x/win_rate"] == 1.0
    assert 0 < metrics["eval/x/elo_diff"] < 800
    assert MatchResult(wins=5, draws=0, losses=5).elo_difference() == pytest.approx(0.0)


def test_the_network_gives_a_policy_per_cell_and_a_value_in_range() -> None:
    net = PolicyValueNet(board_size=6, in_planes=4, blocks=1, channels=8).eval()
    evaluate = NetworkEvaluator(net, "cpu")
    planes = np.stack([GAME.new_state().planes()] * 3)
    logits, values = evaluate(planes)
    assert logits.shape == (3, 36) and values.shape == (3,)
    assert np.all(np.abs(values) <= 1.0)
    assert evaluate.positions == 3
    with torch.no_grad():
        assert np.allclose(net(torch.from_numpy(planes))[0].numpy(), logits)


def test_the_runner_plays_with_the_schedules_values_of_each_step() -> None:
    from framework_plugins.alphazero.collector import schedules
    from framework_plugins.alphazero.config import AlphaZeroConfig

    agent = AlphaZeroConfig(temperature={"kind": "linear", "start": 1.0, "end": 0.25, "fraction": 0.5})
    search = SequentialConfig(
        num_simulations={"kind": "piecewise", "endpoints": [[0, 8], [1000, 32]]},
        dirichlet_epsilon={"kind": "linear", "start": 0.25, "end": 0.0, "steps": 500},
    )
    found = schedules(agent, search, total_steps=2000)
    at = {step: {key: s(step) for key, s in found.items()} for step in (0, 500, 1000, 4000)}
    assert at[0] == {"temperature": 1.0, "dirichlet_epsilon": 0.25, "num_simulations": 8.0}
    assert at[500] == {"temperature": 0.625, "dirichlet_epsilon": 0.0, "num_simulations": 20.0}
    assert at[4000] == {"temperature": 0.25, "dirichlet_epsilon": 0.0, "num_simulations": 32.0}
    search_engine = engine(sims=8)
    runner = VectorizeRunner(
        GAME, search_engine, MoveChoice(1.0, 4), np.random.default_rng(0), n_games=2, noise=True
    )
    runner.configure(at[500])
    assert (runner.choice.temperature, runner.epsilon, runner.full_simulations) == (0.625, 0.0, 20)
    own = (search_engine.dirichlet_epsilon, search_engine.num_simulations)
    calls: list[SearchRequest] = []
    searched = search_engine.search

    def spy(roots: Any, request: SearchRequest) -> Any:
        calls.append(request)
        return searched(roots, request)

    search_engine.search = spy  # type: ignore[method-assign]
    runner.step()
    assert calls[0].simulations == [20, 20] and calls[0].dirichlet_epsilon == 0.0  # the request says it
    assert (search_engine.dirichlet_epsilon, search_engine.num_simulations) == own  # the search unchanged
    found = searched([GAME.new_state()], SearchRequest(simulations=20, add_noise=True, dirichlet_epsilon=0.0))
    assert found.visits.sum() == 20  # the search runs the simulations it is asked
    # A trained agent plays with a schedule's last value.
    assert (
        local_search(search, game=GAME, evaluator_factory=uniform_evaluator(GAME), seed=0).num_simulations
        == 32
    )


def test_each_training_phase_steps_at_the_learning_rate_it_is_given() -> None:
    """agent.learning_rate may be a schedule: a phase at rate 0 leaves the network as it was, and
    rates in proportion move it in proportion (Adam's first steps are about lr a weight)."""
    from framework_plugins.alphazero.config import AlphaZeroConfig
    from framework_plugins.alphazero.learner import Learner

    learner = Learner(AlphaZeroConfig(blocks=1, channels=8, batch_size=16, updates_per_phase=1, min_replay=1))
    learner.setup(GAME, "cpu")
    runner = SelfPlayRunner(GAME, engine(4), MoveChoice(1.0, 36), np.random.default_rng(0), noise=True)
    while not learner.ready():
        for record in runner.step()[1]:
            learner.add_game(record)
    assert learner.net is not None

    def moved(rate: float) -> float:
        before = [p.detach().clone() for p in learner.net.parameters()]  # type: ignore[union-attr]
        learner.train_phase(np.random.default_rng(0), rate)
        after = [p.detach() for p in learner.net.parameters()]  # type: ignore[union-attr]
        return max(float((a - b).abs().max()) for a, b in zip(after, before, strict=True))

    assert moved(0.0) == 0.0
    small, large = moved(1e-4), moved(1e-2)
    assert small > 0 and 30 < large / small < 300
    # Each update's losses, read once the phase is over: at rate 0 each is the network's loss now.
    learner.take_stats()
    learner.cfg.updates_per_phase = 3
    learner.train_phase(np.random.default_rng(1), 0.0)
    assert all(len(learner.stats[k]) == 3 for k in ("train/policy_loss", "train/value_loss"))
    planes, policy, _ = learner.replay.sample(16, np.random.default_rng(1))  # type: ignore[union-attr]
    with torch.no_grad():
        learner.net.train()
        logits, _ = learner.net.heads(torch.from_numpy(planes))
        learner.net.eval()
    log_p = torch.log_softmax(logits, 1)
    assert learner.stats["train/policy_loss"][0] == pytest.approx(
        float(-(torch.from_numpy(policy) * log_p).sum(1).mean()), rel=1e-5
    )
    entropy = learner.take_stats()["train/policy_entropy"]
    assert 0 < entropy <= np.log(GAME.n_actions)


def test_a_win_draw_loss_value_head_learns_the_three_outcomes_apart() -> None:
    # Three positions told apart by their stone count (the replay's symmetries keep it): from the
    # mover's view the empty board is drawn, the one of two stones won, the one of four lost.
    torch.manual_seed(0)
    cfg = AlphaZeroConfig(
        value_head="wdl",
        blocks=1,
        channels=8,
        batch_size=48,
        updates_per_phase=400,
        min_replay=1,
        replay_size=64,
    )
    learner = Learner(cfg)
    learner.setup(GAME, "cpu")
    assert learner.net is not None and learner.net.spec["value_head"] == "wdl"
    states = [GameState.from_moves(GAME, moves) for moves in ([], [14, 15], [14, 15, 20, 21])]
    planes = np.stack([s.planes() for s in states] * 16)
    policies = np.full((len(planes), GAME.n_actions), 1 / GAME.n_actions, np.float32)
    assert learner.replay is not None
    learner.replay.add(planes, policies, np.array([0.0, 1.0, -1.0] * 16, np.float32))
    learner.train_phase(np.random.default_rng(0), 1e-2)
    losses = learner.stats["train/value_loss"]
    assert losses[-1] < 0.4 * losses[0]  # cross-entropy to the outcome's class
    _, values, draws = NetworkEvaluator(learner.net, "cpu")(planes[:3])
    assert draws[0] > 0.8 and abs(values[0]) < 0.1
    assert values[1] > 0.8 and draws[1] < 0.1
    assert values[2] < -0.8 and draws[2] < 0.1
    # A scalar head's spec is as before the option (its runs load as they were saved).
    assert "value_head" not in PolicyValueNet(board_size=6, in_planes=4, blocks=1, channels=8).spec


def test_parallel_games_default_to_the_devices_and_a_given_number_wins() -> None:
    from framework.errors import ConfigError
    from framework_plugins.alphazero.agent import AlphaZeroAgent
    from framework_plugins.alphazero.collector import PARALLEL_GAMES, parallel_games

    assert parallel_games(AlphaZeroConfig(), "cpu") == PARALLEL_GAMES["cpu"] == 32
    assert parallel_games(AlphaZeroConfig(), "cuda:1") == PARALLEL_GAMES["cuda"] == 512
    assert parallel_games(AlphaZeroConfig(parallel_games=8), "cuda") == 8
    with pytest.raises(ConfigError, match=r"agent.parallel_games=0 must be >= 1, or null"):
        AlphaZeroAgent(AlphaZeroConfig(parallel_games=0))
