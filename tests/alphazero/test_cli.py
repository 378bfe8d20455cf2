"""agent=alphazero end to end through `python -m framework`: tracked, resumed, and refused when wrong."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from framework_plugins.mcts.threads import usable_threads
from tests.conftest import LOADED_S, start_cli

pytestmark = pytest.mark.slow

#: A 6x6 run short enough for a test that still trains, gates and evaluates.
SHORT = [
    "experiment=gomoku_6x6",
    "total_steps=640",
    "agent.parallel_games=16",
    "agent.min_replay=128",
    "agent.train_every=128",
    "agent.updates_per_phase=4",
    "agent.batch_size=64",
    "agent.gate_every=2",
    "agent.gate_games=2",
    "search.num_simulations=16",
    "env.eval_opponents=[random,mcts50]",
    "objective.metric=eval/mcts50/score",
    "eval.every_steps=320",
    "eval.episodes=2",
    "checkpoint.every_steps=320",
    "log_every_s=0.5",
]


def only_run(tmp_path: Path):
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    (run,) = client.search_runs([client.get_experiment_by_name("framework").experiment_id])
    return client, run


def test_a_gomoku_run_self_plays_trains_gates_and_evaluates_per_opponent(cli, tmp_path: Path) -> None:
    # On two threads: its 16 games' trees are walked in parallel (threads=N: the tree's as well as torch's).
    # A gate each phase, each accepted (threshold 0): the last one's weights, published at the last step,
    # are counted in the checkpoint written then.
    gates = ("agent.gate_every=1", "agent.gate_threshold=0")
    r = cli(*SHORT, "agent.eval_simulations=24", "threads=2", *gates, "hydra.run.dir=outputs/run")
    assert r.returncode == 0, r.output[-3000:]
    assert "FINISHED at step 640" in r.output
    client, run = only_run(tmp_path)
    assert run.info.status == "FINISHED" and "alphazero-s0 " in run.info.run_name
    assert " gomoku_6x6" in run.info.run_name
    metrics = set(run.data.metrics)
    for opponent in ("random", "mcts50"):
        for key in ("score", "win_rate", "draw_rate", "loss_rate", "elo_diff"):
            assert f"eval/{opponent}/{key}" in metrics
    assert {
        "train/policy_loss",
        "train/value_loss",
        "gate/score",
        "gate/generation",
        "perf/sims_per_s",
    } <= metrics
    assert {"selfplay/games", "selfplay/game_length", "eval/elo"} <= metrics
    # The runner's settings of each step, and the weights' versions self-play searched with.
    assert {"train/temperature", "train/dirichlet_epsilon", "train/num_simulations"} <= metrics
    assert run.data.metrics["train/num_simulations"] == 16
    assert run.data.metrics["eval/simulations"] == 24  # evaluations search as long as asked
    assert {"selfplay/weights_version", "selfplay/weights_lag"} <= metrics
    assert run.data.metrics["perf/tree_threads"] == min(2, usable_threads(0))
    assert run.data.metrics["perf/pipeline_groups"] == 1  # the network on the CPU: no groups
    assert 0 < run.data.metrics["perf/network_busy"] <= 1 and "perf/gpu_busy" not in metrics
    # Evaluated halfway and at the end; the untrained agent at the start, apart, at step 0.
    steps = [m.step for m in client.get_metric_history(run.info.run_id, "eval/mcts50/score")]
    assert steps == [320, 640]
    untrained = client.get_metric_history(run.info.run_id, "eval_untrained/mcts50/score")
    assert [m.step for m in untrained] == [0]
    assert run.data.params["search.name"] == "sequential" and run.data.params["env.board_size"] == "6"
    assert (tmp_path / "outputs/run/checkpoints/step_0000000640/agent/alphazero.pt").is_file()
    saved = json.loads(
        (tmp_path / "outputs/run/checkpoints/step_0000000640/agent/alphazero.json").read_text()
    )
    versions = client.get_metric_history(run.info.run_id, "selfplay/weights_version")
    assert saved["counters"]["generation"] == saved["counters"]["phases"] >= 1
    assert saved["counters"]["weights_version"] == 1 + saved["counters"]["generation"] == versions[-1].value
    assert "eval/mcts50/score" in r.output.split("FINISHED")[1]


def test_ctrl_c_during_an_evaluation_stops_the_run_within_seconds(tmp_path: Path) -> None:
    """An evaluation of many long games (here: the one at the start) gives up at Ctrl-C; the run ends
    KILLED with its checkpoint, and no score of the matches cut short is logged."""
    p = start_cli(
        *SHORT, "tracking=none", "eval.episodes=400", "agent.eval_simulations=400", "log_every_s=0",
        "hydra.run.dir=run", cwd=tmp_path,
    )  # fmt: skip
    log = tmp_path / "run/framework.log"
    deadline = time.monotonic() + 120
    # The first self-play moves (16 steps, their line written at once: log_every_s=0), then the
    # evaluation of 400 games at 400 simulations, which takes tens of seconds: Ctrl-C lands in it.
    while not (log.exists() and "step 16/640" in log.read_text()):
        assert p.poll() is None and time.monotonic() < deadline
        time.sleep(0.1)
    time.sleep(0.5)
    assert p.poll() is None
    p.send_signal(signal.SIGINT)
    sent = time.monotonic()
    out, _ = p.communicate(timeout=60)
    assert time.monotonic() - sent < 5 + LOADED_S, out[-3000:]
    assert p.returncode == 130, out[-3000:]
    assert "Run KILLED at step 16 of 640." in out
    assert "eval/mcts50/score  not measured (no evaluation ran)" in out  # no score of a match cut short
    assert (tmp_path / "run/checkpoints/step_0000000016").is_dir()


@pytest.mark.skipif(usable_threads(2) < 2, reason="needs numba's threads on 2 CPUs")
def test_ctrl_c_during_self_play_on_two_threads_stops_the_run_within_seconds(tmp_path: Path) -> None:
    """32 games' trees walked on 2 threads (the parallel turn) in searches of seconds: Ctrl-C ends the
    search under way, and the run ends KILLED with its checkpoint."""
    p = start_cli(
        *SHORT, "tracking=none", "threads=2", "agent.parallel_games=32", "search.num_simulations=3000",
        "eval.at_start=false", "eval.every_steps=0", "progress=log", "log_every_s=1", "hydra.run.dir=run",
        cwd=tmp_path,
    )  # fmt: skip
    try:
        log = tmp_path / "run/framework.log"
        deadline = time.monotonic() + 180
        # A progress line: the kernels compiled, moves made (a line is written after a step, its
        # search done); the next search (32 x 3,000 simulations, seconds) is under way as it is
        # written, and Ctrl-C lands in it.
        while not (log.exists() and "] - step " in log.read_text()):
            assert p.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        assert p.poll() is None
        p.send_signal(signal.SIGINT)
        sent = time.monotonic()
        out, _ = p.communicate(timeout=60)
        assert time.monotonic() - sent < 10 + LOADED_S, out[-3000:]
        assert p.returncode == 130 and "Run KILLED at step" in out, out[-3000:]
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()


def test_resume_refuses_another_game_or_network_and_continues_the_step_count_games_and_replay(
    cli, tmp_path: Path
) -> None:
    # With a Gumbel root, playout cap randomisation and random openings, which the resumed run keeps.
    learning = [
        "search.root=gumbel",
        "agent.full_search_fraction=0.5",
        "agent.fast_simulations=4",
        "agent.random_openings=0.5",
        "agent.learning_rate={kind: linear, start: 0.002, end: 0.0, fraction: 1.0}",
    ]
    first = cli(*SHORT, *learning, "hydra.run.dir=outputs/a")
    assert first.returncode == 0, first.output[-3000:]
    client, run = only_run(tmp_path)
    assert (
        run.data.params["search.root"] == "gumbel" and run.data.params["agent.full_search_fraction"] == "0.5"
    )
    # About half the moves of each game were full searches, recorded.
    assert 0.35 < run.data.metrics["selfplay/recorded_share"] < 0.65
    # The learning rate's schedule over the run's steps, down to its end at the last step.
    history = sorted(client.get_metric_history(run.info.run_id, "train/learning_rate"), key=lambda m: m.step)
    rates = [m.value for m in history]
    assert rates[0] > rates[-1] and rates == sorted(rates, reverse=True), rates
    assert rates[-1] == pytest.approx(0.002 * max(0.0, 1 - history[-1].step / 640))
    # The loop's last phase and the run's end at one step: its figures logged once there.
    for key in ("train/updates", "selfplay/games", "train/replay_positions"):
        steps = [m.step for m in client.get_metric_history(run.info.run_id, key)]
        assert len(steps) == len(set(steps)), (key, steps)
    games = run.data.metrics["selfplay/games"]
    positions = run.data.metrics["train/replay_positions"]
    # A resume that would change the game or the network was found only as the resumed run trained:
    # a FINISHED run turned FAILED, its config artifact said the new board, and its printed
    # `continue with` failed again, as did `play RUN`. Refused, the run is as it was, and goes on.
    for change in ("env.board_size=7", "env.n_in_row=3", "agent.channels=16"):
        r = cli(f"resume={run.info.run_id}", change, "total_steps=960", "hydra.run.dir=outputs/b")
        assert r.returncode == 1 and "Traceback" not in r.output, r.output[-3000:]
        said = " ".join(r.stderr.split())
        assert f"cannot be loaded with {change}:" in said and "leave those out" in said, said
        assert not (tmp_path / "outputs/b").exists()
    after = client.get_run(run.info.run_id)
    assert after.info.status == "FINISHED" and after.data.params == run.data.params
    again = cli(f"resume={run.info.run_id}", "total_steps=960", "hydra.run.dir=outputs/b")
    assert again.returncode == 0, again.output[-3000:]
    assert "resumed at step 640" in again.output and "FINISHED at step 960" in again.output
    run = client.get_run(run.info.run_id)
    assert run.data.metrics["selfplay/games"] > games
    # The replay came back with the checkpoint (games in progress at the stop are not in it).
    assert run.data.metrics["train/replay_positions"] > positions


def test_training_and_gates_in_the_background_train_gate_checkpoint_and_resume(cli, tmp_path: Path) -> None:
    """agent.background_training=true (a GPU's default) on this CPU: the phases and gates run in
    threads beside self-play, every phase due is trained, and the checkpoint resumes as in turn."""
    # Every gate accepts (threshold 0): the weights' version then counts them, checkpoint and resume.
    bg = ("agent.background_training=true", "agent.gate_threshold=0")
    r = cli(*SHORT, *bg, "total_steps=960", "hydra.run.dir=outputs/a")
    assert r.returncode == 0, r.output[-3000:]
    assert "FINISHED at step 960" in r.output
    client, run = only_run(tmp_path)
    metrics = run.data.metrics
    assert {"train/policy_loss", "train/value_loss", "gate/score", "gate/generation"} <= set(metrics)
    saved = json.loads((tmp_path / "outputs/a/checkpoints/step_0000000960/agent/alphazero.json").read_text())
    counters = saved["counters"]
    # A phase each train_every (128) moves once the replay is ready (by 640 moves on 6x6): every one
    # that fell due was trained, 4 updates each, and a gate fell due every 2nd.
    assert counters["phases"] >= (960 - 640) // 128 and counters["updates"] == 4 * counters["phases"]
    assert 1 <= counters["gates"] == counters["generation"] <= counters["phases"] // 2
    # The checkpoint counts every accepted network's weights, published before it was written.
    assert counters["weights_version"] == 1 + counters["generation"]
    assert metrics["train/updates"] == counters["updates"]
    assert [m.value for m in client.get_metric_history(run.info.run_id, "gate/generation")][-1] == (
        counters["generation"]
    )
    again = cli(f"resume={run.info.run_id}", "total_steps=1280", "hydra.run.dir=outputs/b")
    assert again.returncode == 0, again.output[-3000:]
    assert "resumed at step 960" in again.output and "FINISHED at step 1280" in again.output
    assert client.get_run(run.info.run_id).data.metrics["train/updates"] > counters["updates"]
    # The weights' version goes on from the checkpoint's (its inference service counted from 1 again).
    history = client.get_metric_history(run.info.run_id, "selfplay/weights_version")
    after = [m.value for m in history if m.step > 960]
    assert after and min(after) >= counters["weights_version"], history
    generations = client.get_metric_history(run.info.run_id, "gate/generation")
    assert after[-1] == 1 + max(m.value for m in generations) > counters["weights_version"], history


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["env=cartpole", "agent=alphazero"],
            "agent=alphazero plays by tree search over a board game's rules",
        ),
        (
            ["env=gomoku", "agent=ppo", "search=sequential"],
            "search=sequential needs an agent that plays by search",
        ),
        (
            ["env=gomoku", "agent=alphazero", "~search"],
            "agent=alphazero needs a search engine: search=sequential",
        ),
        (["env=gomoku", "env.board_size=2"], "env.board_size=2 must be in [3, 32]"),
        (["env=gomoku", "env.eval_opponents=[random,mtcs]"], "Unknown Gomoku opponent 'mtcs'"),
        (["experiment=gomoku_6x6", "search.num_simulations=0"], "search.num_simulations=0 must be >= 1"),
        (["experiment=gomoku_6x6", "agent.runner=parallel"], "agent.runner='parallel' is not valid"),
        (
            ["experiment=gomoku_6x6", "agent.runner=single", "search=ray_async", "agent.workers=1"],
            "agent.runner=single plays one game in the run's process, and agent.workers=1",
        ),
        (
            ["experiment=gomoku_6x6", "search=ray_async", "search.workers=2"],
            "search.workers is agent.workers now: give agent.workers=VALUE instead",
        ),
        (
            ["experiment=gomoku_6x6", "agent.workers=2"],
            "agent.workers=2 plays self-play in Ray workers that join the run's inference service, and "
            "this search keeps its service in the run's process: use search=ray_async, or agent.workers=0",
        ),
        (
            ["experiment=gomoku_6x6", "+agent.temperature={kind: linear, start: 1.0}"],
            "agent.temperature: a linear schedule needs end",
        ),
        (
            ["experiment=gomoku_6x6", "search.num_simulations={kind: linear, start: 50, end: 0, steps: 10}"],
            "search.num_simulations={'kind': 'linear', 'start': 50, 'end': 0, 'steps': 10} must be >= 1",
        ),
        (
            ["experiment=gomoku_6x6", "agent.random_openings=1.5"],
            "agent.random_openings=1.5 must be in [0, 1]",
        ),
        (
            ["experiment=gomoku_6x6", "agent.random_openings=0.5", "env.eval_opening_stones=0"],
            "agent.random_openings=0.5 starts self-play games from the env's random openings, and this env "
            "gives none",
        ),
        (
            ["experiment=gomoku_6x6", "agent.learning_rate={kind: linear, start: 0.002, end: -1, steps: 10}"],
            "must be > 0 (a schedule: > 0 at the start, >= 0 after)",
        ),
        (
            ["experiment=gomoku_6x6", "search.inference.backend=tensorrt"],
            "search.inference.backend='tensorrt'",
        ),
        (["experiment=gomoku_6x6", "agent.value_head=wld"], "agent.value_head='wld' is not valid"),
        (
            [
                "experiment=gomoku_6x6",
                "agent.background_training=true",
                "search=ray_async",
                "agent.workers=1",
            ],
            "agent.background_training=true trains beside the run's own self-play, and agent.workers=1",
        ),
        (["experiment=gomoku_6x6", "search.draw_contempt=1.5"], "search.draw_contempt=1.5 must be in [0, 1]"),
        (
            ["experiment=gomoku_6x6", "search.draw_contempt=0.2"],
            "search.draw_contempt=0.2 is a player's (play RUN search.draw_contempt=0.2",
        ),
    ],
)
def test_mistakes_are_refused_in_one_line_before_anything_starts(
    cli, tmp_path: Path, args: list[str], message: str
) -> None:
    r = cli(*args)
    assert r.returncode == 1, r.output[-2000:]
    assert message in r.output
    assert "Traceback" not in r.output
    assert not (tmp_path / "mlflow.db").exists()
    assert not (tmp_path / "outputs").exists()  # nor the folder Hydra made for the run


def test_ppo_plays_gomoku_as_a_gymnasium_env_and_is_evaluated_per_opponent(cli, tmp_path: Path) -> None:
    r = cli(
        "env=gomoku",
        "env.board_size=6",
        "env.n_in_row=4",
        "env.eval_opponents=[random,heuristic]",
        "agent=ppo",
        "agent.hyperparams.n_steps=64",
        "total_steps=128",
        "eval.every_steps=0",
        "eval.episodes=2",
    )
    assert r.returncode == 0, r.output[-3000:]
    _, run = only_run(tmp_path)
    for opponent in ("random", "heuristic"):
        assert {f"eval/{opponent}/win", f"eval/{opponent}/loss", f"eval/{opponent}/return_mean"} <= set(
            run.data.metrics
        )
    assert "eval/return_mean" in run.data.metrics
