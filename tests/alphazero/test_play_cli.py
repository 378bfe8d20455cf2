"""A trained run plays: `python -m framework gomocup RUN` as a Gomocup brain in a subprocess, a whole
game, by run directory and by tracked run id; mistakes in one line. Shipping it and its page:
test_ship_and_play.py."""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from framework_plugins.gomoku.rules import GameState
from tests.alphazero.brain import GAME, MOVE, Brain
from tests.conftest import run_cli

pytestmark = pytest.mark.slow


def test_a_whole_gomocup_game_through_a_subprocess(trained: tuple[Path, str], brains: list[Brain]) -> None:
    cwd, _ = trained
    brain = Brain(cwd, "outputs/run", "search.num_simulations=64")
    brains.append(brain)
    brain.send("ABOUT")
    about = brain.answer(timeout=120)  # the first answer waits for torch and the checkpoint
    assert about.startswith('name="framework-alphazero"') and 'version="' in about
    brain.send("INFO timeout_turn 5000", "INFO timeout_match 0", "INFO max_memory 83886080", "INFO rule 0")
    brain.send("START 15")
    error = brain.answer()
    assert error.startswith("ERROR ") and "15x15" in error
    brain.send("START 9")
    assert brain.answer() == "OK"
    # A whole game: the brain opens, a seeded random player answers, until a win or a full board.
    rng = np.random.default_rng(0)
    state = GameState(GAME)
    command = "BEGIN"
    while True:
        move = brain.move(command)
        assert state.legal[move], f"illegal answer {GAME.to_xy(move)} to {command}"
        state.play(move)
        if state.done:
            break
        theirs = int(rng.choice(np.flatnonzero(state.legal)))
        state.play(theirs)
        if state.done:
            break
        command = "TURN {},{}".format(*GAME.to_xy(theirs))
    assert state.winner == 1  # a searching brain beats a random player
    assert all(m.startswith("MESSAGE value ") for m in brain.messages)
    # A second game from a position, then END: the brain exits at once, nothing else on stdout.
    brain.send("RESTART")
    assert brain.answer() == "OK"
    reply = brain.move("BOARD", "4,4,2", "3,3,1", "5,5,2", "DONE")
    assert reply not in {GAME.from_xy(4, 4), GAME.from_xy(3, 3), GAME.from_xy(5, 5)}
    brain.send("END")
    assert brain.exit_status(timeout=30) == 0
    assert brain.lines.get(timeout=10) is None


def test_the_brain_searches_with_ray_async_too(
    trained: tuple[Path, str], brains: list[Brain], ray_session: Any
) -> None:
    """search=ray_async in place of the run's sequential search: the same protocol, its network on a
    Ray actor of the session's Ray (ray.address), stdout still only the protocol."""
    cwd, _ = trained
    brain = Brain(
        cwd,
        "outputs/run",
        "search=ray_async",
        "search.num_simulations=64",
        f"ray.address={ray_session.address}",
    )
    brains.append(brain)
    brain.send("START 9")
    assert brain.answer(timeout=120) == "OK"
    first = brain.move("BEGIN")
    second = brain.move("TURN 0,0")
    assert first != second and GAME.from_xy(0, 0) not in (first, second)
    assert any("simulations 64" in m for m in brain.messages), brain.messages
    brain.send("END")
    assert brain.exit_status(timeout=60) == 0


def test_sigterm_stops_a_brain_that_started_its_own_ray_as_ctrl_c_does(
    trained: tuple[Path, str], brains: list[Brain]
) -> None:
    """search=ray_async with a local Ray of its own (ray.init replaces SIGTERM's handler): SIGTERM
    from a Gomocup manager still ends the brain in order, status 130, its Ray's processes gone."""
    from framework_plugins.ray_runtime.reaper import ray_descendants

    cwd, _ = trained
    brain = Brain(cwd, "outputs/run", "search=ray_async", "search.num_simulations=16", "ray.num_cpus=2")
    brains.append(brain)
    brain.send("START 9")
    assert brain.answer(timeout=180) == "OK"
    brain.move("BEGIN")
    ray_processes = set(ray_descendants(brain.process.pid))
    assert ray_processes, "no local Ray under the brain"
    brain.process.send_signal(signal.SIGTERM)
    assert brain.exit_status(timeout=60) == 130
    err = brain.stderr()
    assert "SIGTERM" not in err and "Traceback" not in err, err[-3000:]
    deadline = time.monotonic() + 40
    while any(Path(f"/proc/{pid}").exists() for pid in ray_processes) and time.monotonic() < deadline:
        time.sleep(0.5)
    left = [pid for pid in ray_processes if Path(f"/proc/{pid}").exists()]
    assert not left, f"Ray processes left: {left}"


def test_an_agent_a_plugin_ships_is_played_by_its_name(
    trained: tuple[Path, str], brains: list[Brain], tmp_path: Path
) -> None:
    """A distribution registers a shipped checkpoint (framework_plugins.alphazero.ship) under
    framework.trained: `plugins` lists it, and gomocup plays it by name from any directory."""
    from framework_plugins.alphazero.ship import ship

    cwd, _ = trained
    site = tmp_path / "site"
    ship(cwd / "outputs/run", site / "tiny_agents" / "tiny9", "A tiny 9x9 agent for tests.")
    (site / "tiny_agents" / "__init__.py").write_text("")
    dist = site / "tiny_agents-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: tiny-agents\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[framework.trained]\ntiny9 = tiny_agents.tiny9\n")
    assert not (site / "tiny_agents" / "tiny9" / "agent" / "replay.npz").exists()  # the network alone
    paths = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    env = {"PYTHONPATH": paths}
    listed = run_cli("plugins", "--kind", "trained", cwd=tmp_path, env=env)
    assert listed.returncode == 0 and "tiny9" in listed.stdout
    assert "A tiny 9x9 agent for tests." in listed.stdout
    brain = Brain(tmp_path, "tiny9", "search.num_simulations=16", env=env)
    brains.append(brain)
    brain.send("START 9", "BEGIN", "END")
    assert brain.answer(timeout=120) == "OK", brain.messages
    assert MOVE.match(brain.answer())
    assert brain.exit_status(timeout=30) == 0


def test_start_with_a_size_the_model_was_not_trained_for_is_an_error_line(
    trained: tuple[Path, str], brains: list[Brain]
) -> None:
    cwd, _ = trained
    brain = Brain(cwd, "outputs/run")
    brains.append(brain)
    brain.send("START 15")
    answer = brain.answer(timeout=120)
    assert answer.startswith("ERROR ") and "9x9" in answer and "15x15" in answer
    brain.send("START 9")
    assert brain.answer() == "OK"
    brain.process.stdin.close()  # type: ignore[union-attr]  # the manager is gone: the brain exits
    assert brain.exit_status(timeout=30) == 0


def test_the_brain_is_found_by_its_tracked_run_id_even_when_its_directory_is_gone(
    trained: tuple[Path, str], brains: list[Brain], tmp_path: Path
) -> None:
    cwd, run_id = trained
    brain = Brain(cwd, run_id)
    brains.append(brain)
    brain.send("START 9")
    assert brain.answer(timeout=120) == "OK"
    brain.send("BEGIN")
    assert MOVE.match(brain.answer())
    # The run self-played at 8 simulations a move; a player searches PLAY_SIMULATIONS unless told.
    assert any("simulations 400 " in m for m in brain.messages), brain.messages
    brain.send("END")
    assert brain.exit_status(timeout=30) == 0
    # Without the run directory, the checkpoint comes from the run's artifacts.
    moved = tmp_path / "moved"
    shutil.move(cwd / "outputs", moved)
    try:
        brain = Brain(cwd, run_id)
        brains.append(brain)
        brain.send("START 9", "BEGIN", "END")
        assert brain.answer(timeout=120) == "OK"
        assert MOVE.match(brain.answer())
        assert brain.exit_status(timeout=30) == 0
    finally:
        shutil.move(moved, cwd / "outputs")
    assert not list(Path(os.environ.get("TMPDIR", "/tmp")).glob("framework-play-*"))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nowhere"], "'nowhere' is neither a run directory, a tracked run nor a shipped agent"),
        (["outputs/run", "env.board_size=15"], "'env.board_size=15' cannot be set here"),
        (["outputs/run", "total_steps=5"], "set search.* (search.num_simulations=800)"),
        (["outputs/run", "search.num_simulations=0"], "search.num_simulations=0 must be >= 1"),
        (["outputs/run", "search.num_simulatons=5"], "Did you mean search.num_simulations?"),
        (
            ["outputs/run", "search=nosuch"],
            "search=nosuch is not a search engine; choose one of: ray_async, sequential",
        ),
        (["outputs"], "no checkpoint there"),
        (["outputs/rnu"], "outputs/rnu: no such directory (RUN is a run directory, a tracked run id or"),
    ],
)
def test_gomocup_mistakes_are_one_line_before_anything_is_read(
    trained: tuple[Path, str], args: list[str], message: str
) -> None:
    cwd, _ = trained
    r = run_cli("gomocup", *args, cwd=cwd, timeout=120)
    assert r.returncode == 1
    assert r.stdout == ""
    assert message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_any_bytes_get_an_answer_and_the_brain_plays_on(
    trained: tuple[Path, str], brains: list[Brain]
) -> None:
    cwd, _ = trained
    brain = Brain(cwd, "outputs/run", "search.num_simulations=8")
    brains.append(brain)
    brain.send("START 9")
    assert brain.answer() == "OK"
    assert brain.process.stdin is not None
    junks = [
        b"\xff\xfe\x00 garbage",
        "\u00c4\u00d6 \u2603".encode(),
        b"TURN \x80,\x81",
        b"\x1b[31mRED",
        b"AB\rOUT\x07",
    ]
    for junk in junks:
        brain.process.stdin.buffer.write(junk + b"\n")  # type: ignore[attr-defined]
        brain.process.stdin.buffer.flush()  # type: ignore[attr-defined]
        answer = brain.answer()
        assert answer.startswith(("ERROR", "UNKNOWN")) and answer.isascii() and answer.isprintable(), answer
    brain.move("BEGIN")
    brain.send("END")
    assert brain.exit_status(timeout=30) == 0


def test_a_run_directory_whose_run_went_on_elsewhere_is_played_from_there(
    trained: tuple[Path, str], brains: list[Brain], tmp_path: Path
) -> None:
    """Its first directory, which a resume emptied of checkpoints, was 'no checkpoint there'."""
    from framework.checkpoint import WENT_ON_FILE

    cwd, _ = trained
    first = tmp_path / "first"
    (first / "checkpoints").mkdir(parents=True)
    (first / "checkpoints" / WENT_ON_FILE).write_text(str(cwd / "outputs/run"))
    brain = Brain(tmp_path, str(first), "search.num_simulations=8")
    brains.append(brain)
    brain.send("START 9", "BEGIN", "END")
    assert brain.answer(timeout=120) == "OK", brain.messages
    assert MOVE.match(brain.answer())
    assert brain.exit_status(timeout=30) == 0


def test_a_player_of_a_ray_async_run_searches_in_its_own_process_unless_told(
    trained: tuple[Path, str], tmp_path: Path
) -> None:
    """One game's search needs no Ray (13 s to start): a player of a run trained with ray_async plays
    with the sequential search and the run's settings of it; `search=ray_async` keeps Ray's."""
    from omegaconf import OmegaConf

    from framework import config
    from framework.conf_packages import register_schemas
    from framework_plugins.gomoku.player import load_trained

    cwd, _ = trained
    run = tmp_path / "run"
    shutil.copytree(cwd / "outputs/run", run)
    checkpoint = run / "checkpoints" / (run / "checkpoints/latest").read_text().strip()
    saved = OmegaConf.load(checkpoint / "config.yaml")
    register_schemas()
    ray_async = OmegaConf.to_container(OmegaConf.structured(config.SCHEMAS[("search", "ray_async")]))
    saved.search = {**ray_async, "name": "ray_async", "num_simulations": 900, "c_puct": 2.5}  # type: ignore[dict-item]
    OmegaConf.save(saved, checkpoint / "config.yaml")
    player = load_trained(str(run), [], command="gomocup")
    try:
        assert player.cfg.search.name == "sequential"
        assert (player.cfg.search.num_simulations, player.cfg.search.c_puct) == (900, 2.5)
    finally:
        player.close()
    player = load_trained(str(run), ["search=ray_async"], command="gomocup")
    try:
        assert player.cfg.search.name == "ray_async"
    finally:
        player.close()
