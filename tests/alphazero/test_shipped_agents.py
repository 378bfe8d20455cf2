"""The trained agents the package ships (entry-point group framework.trained): small, saying where they
came from, and played by name right after install."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from framework import registry
from framework_plugins.gomoku.player import PLAY_SIMULATIONS, load_trained, shipped_checkpoint
from tests.alphazero.brain import MOVE, Brain

SHIPPED = registry.names("trained")
MAX_BYTES = 2_000_000


def test_the_15x15_agent_ships_with_the_package() -> None:
    assert "gomoku_15x15" in SHIPPED, SHIPPED


@pytest.mark.parametrize("name", SHIPPED)
def test_a_shipped_agent_is_small_and_says_how_it_was_trained(name: str) -> None:
    folder = shipped_checkpoint(name)
    files = [f for f in folder.rglob("*") if f.is_file() and "__pycache__" not in f.parts]
    assert sum(f.stat().st_size for f in files) <= MAX_BYTES, [(f.name, f.stat().st_size) for f in files]
    provenance = json.loads((folder / "provenance.json").read_text())
    assert provenance["step"] > 0 and provenance["games"] > 0
    assert "python -m framework experiment=" in provenance["about"]
    # Nothing of the machine it was trained on: a run resumed to its end ships as a run.
    config = (folder / "config.yaml").read_text()
    assert "resume: null" in config and "/work/" not in config and "/tmp/" not in config


@pytest.mark.slow
@pytest.mark.parametrize("name", SHIPPED)
def test_a_shipped_agent_plays_by_its_name_from_any_directory(
    name: str, brains: list[Brain], tmp_path: Path
) -> None:
    size = json.loads((shipped_checkpoint(name) / "provenance.json").read_text())["board_size"]
    brain = Brain(tmp_path, name, "search.num_simulations=32")
    brains.append(brain)
    brain.send(f"START {size}", "BEGIN")
    assert brain.answer(timeout=120) == "OK", brain.messages
    found = MOVE.match(brain.answer(timeout=60))
    assert found and all(0 <= int(v) < size for v in found.groups())
    brain.send("END")
    assert brain.process.wait(timeout=30) == 0
    assert not list(tmp_path.iterdir()), "playing a shipped agent writes nothing where it runs"


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [((), PLAY_SIMULATIONS), (("search.num_simulations=32",), 32), (("search.num_simulations=1000",), 1000)],
)
def test_a_trained_agent_searches_as_a_player_unless_told(overrides: tuple[str, ...], expected: int) -> None:
    """The preset self-played 32 simulations a move; its player searches PLAY_SIMULATIONS (the
    strength the README reports), or what the command line says."""
    with load_trained("gomoku_15x15", overrides) as player:
        assert player.cfg.search.num_simulations == expected
        assert player.engine().num_simulations == expected  # type: ignore[attr-defined]


def test_a_trained_agent_plays_with_the_games_solver_unless_told() -> None:
    """The shipped agent's run predates `search.forced_wins`: as a player it searches with the
    game's solver, so a win by continuous fours is played with every simulation, at once."""
    from framework_plugins.gomoku.rules import GameState
    from framework_plugins.gomoku.threats import forced_win

    with load_trained("gomoku_15x15", ("search.num_simulations=16",)) as player:
        assert player.cfg.search.forced_wins is True
        game = player.game
        # Black: a three on row 6 closed at its left, two stones of column 9 below (9, 6): (9, 6) is a
        # four and an open three at once.
        black = [(6, 6), (7, 6), (8, 6), (9, 7), (9, 8)]
        white = [(5, 6), (0, 0), (14, 0), (0, 14), (14, 14)]
        moves = [game.from_xy(*c) for pair in zip(black, white, strict=True) for c in pair]
        state = GameState.from_moves(game, moves)
        win = forced_win(state.board.copy(), state.to_play, game.params)
        assert win == game.from_xy(9, 6)
        counts = player.engine().search([state]).visits[0]
        assert counts[win] == counts.sum() == 16
    with load_trained("gomoku_15x15", ("search.forced_wins=false",)) as player:
        assert player.cfg.search.forced_wins is False
        assert not player.engine().params.forced_wins  # type: ignore[attr-defined]


def test_a_scheduled_simulation_count_plays_at_its_last_value_or_more() -> None:
    from omegaconf import OmegaConf

    from framework_plugins.gomoku.player import _play_simulations

    ramp = {"kind": "linear", "start": 50, "end": 800, "fraction": 0.5}
    for spec, expected in ((ramp, 800), ({**ramp, "end": 200}, PLAY_SIMULATIONS), (16, PLAY_SIMULATIONS)):
        cfg = OmegaConf.create({"search": {"num_simulations": spec}})
        _play_simulations(cfg, chosen=False)
        assert cfg.search.num_simulations == expected
    chosen = OmegaConf.create({"search": {"num_simulations": 16}})
    _play_simulations(chosen, chosen=True)
    assert chosen.search.num_simulations == 16


def gpu_run(tmp_path: Path, **search: object) -> Path:
    """The shipped 15x15 agent as a run trained on a big GPU machine: device=cuda, `search` set."""
    import shutil

    from omegaconf import OmegaConf

    run = tmp_path / "gpu-run"
    shutil.copytree(shipped_checkpoint("gomoku_15x15"), run, ignore=shutil.ignore_patterns("__pycache__"))
    config = OmegaConf.load(run / "config.yaml")
    config.device = "cuda"
    config.search = {**OmegaConf.to_container(config.search), **search}  # type: ignore[dict-item]
    OmegaConf.save(config, run / "config.yaml")
    return run


def test_a_network_trained_on_a_gpu_plays_on_the_machine_at_hand(tmp_path: Path) -> None:
    """`device=cuda` in a run's config names the machine it trained on: a player takes this machine's
    GPU where there is one, else its CPU, unless the command line names a device."""
    import torch

    from framework.errors import ConfigError

    run = gpu_run(tmp_path)
    here = "cuda" if torch.cuda.is_available() else "cpu"
    with load_trained(str(run), ("search.num_simulations=8",)) as player:
        assert player.device == here and player.cfg.device == "auto"
        weights = next(player.agent.learner.best.parameters())  # type: ignore[attr-defined]
        assert weights.device.type == here
        counts = player.engine().search([player.game.new_state()]).visits[0]
        assert counts.sum() == 8  # the network answers the search on this machine
    if here == "cpu":
        with pytest.raises(ConfigError, match="finds no CUDA GPU"):
            load_trained(str(run), ("device=cuda",))


def test_a_run_that_self_played_in_many_workers_plays_without_them(tmp_path: Path) -> None:
    """search=ray_async with 8 self-play workers on a 16-core machine: a player self-plays nothing,
    so it asks this 2-core machine for none of them (the inference actor alone), unless told."""
    from omegaconf import OmegaConf

    from framework.errors import ConfigError
    from framework_plugins.mcts.config import RayAsyncConfig

    defaults = OmegaConf.to_container(OmegaConf.structured(RayAsyncConfig))
    assert isinstance(defaults, dict)
    run = gpu_run(tmp_path, **{**defaults, "name": "ray_async", "workers": 8, "batch_size": 128})
    with load_trained(str(run)) as player:  # one game: the sequential search, no Ray
        assert player.cfg.search.name == "sequential"
        assert player.cfg.agent.workers == 0 and "workers" not in player.cfg.search
    with load_trained(str(run), ("search=ray_async",)) as player:  # no engine made: no Ray started
        assert player.cfg.search.name == "ray_async"
        # The run's search.workers (saved before workers were the agent's) read as agent.workers.
        assert player.cfg.agent.workers == 0 and "workers" not in player.cfg.search
        assert player.cfg.search.batch_size == 128  # the run's own settings of its search
        assert not player.searches.started
    # More than the test session's Ray (8 CPUs) holds too, where this process is connected to it.
    with pytest.raises(ConfigError, match="9 inference actor"):
        load_trained(str(run), ("search=ray_async", "search.inference_actors=9", "ray.num_cpus=2"))


def test_a_trained_agent_blocks_a_four_whatever_its_run_searched_with(tmp_path: Path) -> None:
    """A 9x9 run's agent (forced_blocks off, Gumbel root of 16 considered moves) left a four on the
    edge open, valuing every move it considered -0.997, at any number of simulations."""
    import shutil

    from framework_plugins.gomoku.rules import GameState

    run = tmp_path / "checkpoint"
    shutil.copytree(shipped_checkpoint("gomoku_15x15"), run)
    config = run / "config.yaml"
    config.write_text(config.read_text().replace("forced_blocks: true", "forced_blocks: false"))
    with load_trained(str(run), ("search.num_simulations=16",)) as player:
        assert player.cfg.search.forced_blocks is True
        game = player.game
        black = [(0, 0), (1, 0), (2, 0), (3, 0)]  # a four on the edge: (4, 0) is its only block
        white = [(7, 7), (7, 9), (9, 7)]
        moves = [
            game.from_xy(*c) for c in [black[0], white[0], black[1], white[1], black[2], white[2], black[3]]
        ]
        counts = player.engine().search([GameState.from_moves(game, moves)]).visits[0]
        assert counts[game.from_xy(4, 0)] == counts.sum() == 16
    with load_trained(str(run), ("search.forced_blocks=false",)) as player:
        assert player.cfg.search.forced_blocks is False
