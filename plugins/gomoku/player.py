"""A trained run, loaded to play: its saved config and last checkpoint rebuilt into the env's game,
the agent and search engines, outside a training run (the `play RUN` and `gomocup RUN` commands).

RUN is a run directory (or one of its checkpoints), a tracked run id, as for `resume=`, or the name
of a trained agent a plugin ships (entry-point group `framework.trained`: the name, and the package
that holds its checkpoint). The command line may change how the agent searches
(`search.num_simulations=800`, `search=NAME`), the device, threads and seed; what the agent was
trained as (`env.*`, `agent.*`) stays as it ran. Unless told, it searches `PLAY_SIMULATIONS` a move
(or the run's own number, where larger), not the small trees self-play searched; it plays on this
machine's GPU where it has one, else its CPU (`device=auto`), and starts no self-play workers
(`agent.workers=0`): the run's device and workers name the machine it trained on, and a network
trained on a GPU with many workers plays anywhere. It searches with the game's solver where the
game has one (`search.forced_wins=true`: it never misses a win by continuous fours) and blocks a
win one move away (`search.forced_blocks=true`), unless the command line says `=false`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from framework import config, registry, services
from framework.checkpoint import AGENT_DIR, CONFIG_FILE, find_latest, read_state, where_it_went_on
from framework.errors import ConfigError
from framework_plugins.boardgames import GameEnvPlugin, SearchAgent, SearchEngine, SolvingGame
from framework_plugins.boardgames.searches import RunSearches

#: Root keys a command line may set on a trained run; and the sections (ray: where search=ray_async runs).
ROOT_KEYS = ("seed", "device", "threads")
SECTIONS = ("search", "tracking", "ray")
#: Simulations a move a trained agent searches unless the command line sets `search.num_simulations`
#: (the run's own number where it is larger): self-play searches small trees to make many games
#: (the Gomoku presets: 32 a move), a player searches as deep as the strength the README reports.
PLAY_SIMULATIONS = 400


@dataclass
class TrainedPlayer:
    """A trained search agent with its env's game: `engine()` makes searches that play it."""

    cfg: DictConfig
    """The run's saved config with this command line's overrides."""
    checkpoint: Path
    step: int
    env: GameEnvPlugin
    agent: SearchAgent
    device: str
    searches: RunSearches
    """The search plugin and the one inference service every engine of this player shares."""
    label: str
    """`run <id>` or the run directory: what the player is, in messages."""
    _temp: Path | None = None

    @property
    def game(self) -> Any:
        return self.env.game

    def engine(self, game: Any = None, *, seed: int | None = None) -> SearchEngine:
        """A search for `game` (the env's by default) over the trained agent's network."""
        return self.searches.make(seed=int(self.cfg.seed if seed is None else seed), game=game)

    def close(self, *, exiting: bool = False) -> None:
        """Close the searches and the inference service; drop a checkpoint downloaded from tracking.
        `exiting`: the process exits next, and a local Ray is left to the reaper to end at once."""
        self.searches.close()
        # A local Ray the service started (search=ray_async) ends with the player.
        services.close_all(at_once=exiting)
        if self._temp is not None:
            shutil.rmtree(self._temp, ignore_errors=True)
            self._temp = None

    def __enter__(self) -> TrainedPlayer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def load_trained(target: str, overrides: Sequence[str] = (), *, command: str = "play") -> TrainedPlayer:
    """The run `target` (a run directory, a tracked run id or a shipped agent's name) loaded to play;
    mistakes are ConfigErrors."""
    parsed = _parse(overrides, command)
    temp: Path | None = None
    try:
        if Path(target).exists():
            # a run directory whose run went on in another (a resume's): its checkpoints are there now
            checkpoint = find_latest(where_it_went_on(Path(target)) or Path(target))
            if checkpoint is None:
                raise ConfigError(
                    f"{target}: no checkpoint there (a run directory holds checkpoints/latest; give the run "
                    "directory or one of its checkpoints/step_* folders)"
                )
            label = str(Path(target).resolve())
        elif target in registry.discover("trained"):
            checkpoint = shipped_checkpoint(target)
            label = f"{target} (shipped)"
        elif "/" in target or os.sep in target or target.startswith((".", "~")):  # a path, not a run id
            shipped = ", ".join(registry.names("trained")) or "none installed"
            raise ConfigError(
                f"{target}: no such directory (RUN is a run directory, a tracked run id or a shipped "
                f"agent: {shipped})"
            )
        else:
            temp = Path(tempfile.mkdtemp(prefix="framework-play-"))
            checkpoint = _tracked_checkpoint(target, parsed, temp)
            label = f"run {target}"
        player = _build(checkpoint, parsed, label, command)
    except BaseException:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
        raise
    player._temp = temp
    return player


def shipped_checkpoint(name: str) -> Path:
    """The checkpoint of the trained agent a plugin ships as `name`: the folder of its package."""
    from importlib.resources import files

    return Path(str(files(registry.info("trained", name).entry_point.module)))


def _parse(overrides: Sequence[str], command: str) -> list[tuple[str, Any]]:
    """(key, value) of each `key=value`; only what changes how a trained agent plays."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except HydraException as e:
        raise ConfigError(
            f"{command}: {str(e).splitlines()[0]}: after RUN come overrides, key=value "
            "(search.num_simulations=800); python -m framework " + command + " --help lists the options"
        ) from None
    items = []
    for item in parsed:
        key = item.key_or_group
        top = key.split(".", 1)[0]
        if item.is_sweep_override() or item.is_delete() or (top not in SECTIONS and key not in ROOT_KEYS):
            raise ConfigError(
                f"{command}: {item.input_line!r} cannot be set here: a trained run plays as it was trained; "
                f"set search.* (search.num_simulations=800), search=NAME, tracking.*, ray.*, or "
                f"{', '.join(ROOT_KEYS)}"
            )
        items.append((key, item.value()))
    return items


def _tracked_checkpoint(run_id: str, overrides: list[tuple[str, Any]], temp: Path) -> Path:
    """The last checkpoint of a tracked run: its run directory's, else rebuilt from its artifacts."""
    from framework.building import build_plugin
    from framework.provenance import run_dir_of
    from framework.resume import download_checkpoint, local_checkpoint

    cfg = _compose_tracking(overrides)
    section = config.plugin_section(cfg, "tracking")
    if section is None:
        raise ConfigError(f"{run_id!r} is not a directory, and tracking is off to look it up as a run id")
    tracker = build_plugin(section, "tracker")
    try:
        try:
            tags = tracker.run_tags(run_id)
        except LookupError as e:
            shipped = ", ".join(registry.names("trained")) or "none installed"
            raise ConfigError(
                f"{run_id!r} is neither a run directory, a tracked run nor a shipped agent ({shipped}): {e}"
            ) from None
        found, why_not = local_checkpoint(run_id, run_dir_of(tags))
        if found is None:
            found = download_checkpoint(tracker, run_id, temp / "checkpoint", why_not)
        return found
    finally:
        tracker.close()


def _compose_tracking(overrides: list[tuple[str, Any]]) -> DictConfig:
    from framework.app import compose

    chosen = [f"tracking={value}" for key, value in overrides if key == "tracking"]
    cfg = compose(chosen)
    for key, value in overrides:
        if key.startswith("tracking."):
            OmegaConf.update(cfg, key, value, force_add=False)
    return cfg


def _build(checkpoint: Path, overrides: list[tuple[str, Any]], label: str, command: str) -> TrainedPlayer:
    from framework.building import build_plugin, run_threads, setup_torch

    state = read_state(checkpoint)
    saved = OmegaConf.load(checkpoint / CONFIG_FILE)
    assert isinstance(saved, DictConfig)
    config.migrate(saved)
    cfg = _with_overrides(saved, overrides)
    chosen = {key for key, _ in overrides}
    _as_player(cfg, chosen=chosen)
    config.check_root(cfg)
    services.open_all(cfg)
    env_section, agent_section = config.plugin_section(cfg, "env"), config.plugin_section(cfg, "agent")
    assert env_section is not None and agent_section is not None  # check_root
    env = build_plugin(env_section, "env")
    search_section = config.plugin_section(cfg, "search")
    agent = build_plugin(agent_section, "agent")
    if not isinstance(env, GameEnvPlugin) or not isinstance(agent, SearchAgent) or search_section is None:
        raise ConfigError(
            f"{command} {label}: that run trained agent={agent_section.name} on env={env_section.name}; "
            f"{command} plays a board-game agent that searches (e.g. experiment=gomoku_9x9)"
        )
    _with_solver(cfg, search_section, env.game, chosen)
    device = setup_torch(str(cfg.device), int(cfg.threads), int(cfg.seed))
    try:
        agent.load(checkpoint / AGENT_DIR)
    except (OSError, ValueError, KeyError, RuntimeError) as e:
        raise ConfigError(f"{command} {label}: the checkpoint {checkpoint} cannot be loaded: {e}") from None
    agent.to(device)
    player = TrainedPlayer(
        cfg=cfg,
        checkpoint=checkpoint,
        step=int(state["step"]),
        env=env,
        agent=agent,
        device=device,
        searches=RunSearches(
            build_plugin(search_section, "search"),
            env.game,
            agent.evaluator,
            device=device,
            threads=run_threads(int(cfg.threads)),
        ),
        label=label,
    )
    return player


def _as_player(cfg: DictConfig, *, chosen: set[str]) -> None:
    """What the run's config says of its training machine and self-play, made a player's (unless
    the command line says): PLAY_SIMULATIONS, this machine's device, no self-play workers, and the
    sequential search for a run's ray_async (one game's trees, the same moves, and no Ray to start)."""
    if "search" not in chosen and OmegaConf.select(cfg, "search.name") == "ray_async":
        from framework.conf_packages import register_schemas

        register_schemas()
        defaults = OmegaConf.to_container(OmegaConf.structured(config.SCHEMAS[("search", "sequential")]))
        assert isinstance(defaults, dict)
        cfg.search = {**{k: cfg.search.get(k, v) for k, v in defaults.items()}, "name": "sequential"}
    _play_simulations(cfg, chosen="search.num_simulations" in chosen)
    if "device" not in chosen:
        cfg.device = "auto"
    agent = registry.load("agent", str(cfg.agent.name)).Config
    if "agent.workers" not in chosen and "workers" in {f.name for f in fields(agent)}:
        cfg.agent.workers = 0  # a player's search runs in its own process: no games to self-play


def _with_solver(cfg: DictConfig, search: config.Section, game: Any, chosen: set[str]) -> None:
    """A player searches with the game's solver where the game has one and the search takes it
    (`search.forced_wins`: Gomoku's continuous fours), and blocks a win one move away
    (`search.forced_blocks`: a root whose Gumbel halving considers 16 moves, the block not among
    them, played on knowing it lost), whatever the run self-played with, unless the command line
    says: both only add what the rules prove, and a run older than the options has them off."""
    keys = {f.name for f in fields(search.cfg)}
    if "forced_wins" in keys and "search.forced_wins" not in chosen:
        search.cfg.forced_wins = cfg.search.forced_wins = isinstance(game, SolvingGame)
    if "forced_blocks" in keys and "search.forced_blocks" not in chosen:
        blocks = "detect_wins" not in keys or bool(search.cfg.detect_wins)  # blocks need it
        search.cfg.forced_blocks = cfg.search.forced_blocks = blocks


def _play_simulations(cfg: DictConfig, *, chosen: bool) -> None:
    """`search.num_simulations` a player searches: the command line's, else PLAY_SIMULATIONS or the
    run's own (a schedule's last value), whichever is larger."""
    search = cfg.get("search")
    if chosen or not isinstance(search, DictConfig) or search.get("num_simulations") is None:
        return
    from framework.schedules import final_value

    try:
        trained = final_value(search.num_simulations, name="search.num_simulations")
    except ValueError:
        return  # the search plugin's own check says what is wrong with it
    search.num_simulations = max(int(trained), PLAY_SIMULATIONS)


def _with_overrides(saved: DictConfig, overrides: list[tuple[str, Any]]) -> DictConfig:
    cfg = saved.copy()
    OmegaConf.set_struct(cfg, False)
    for key, value in overrides:
        if key == "search" and str(value) == OmegaConf.select(saved, "search.name"):
            continue  # the run's own search, with the run's settings of it
        if key == "search":
            from framework.conf_packages import register_schemas

            register_schemas()
            schema = config.SCHEMAS.get(("search", str(value)))
            if schema is None:
                names = sorted(name for section, name in config.SCHEMAS if section == "search")
                raise ConfigError(f"search={value} is not a search engine; choose one of: {', '.join(names)}")
            cfg.search = {"name": str(value), **OmegaConf.to_container(OmegaConf.structured(schema))}  # type: ignore[dict-item]
        elif key != "tracking" and not key.startswith("tracking."):
            OmegaConf.update(cfg, key, value, force_add=True)
    return cfg
