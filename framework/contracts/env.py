"""Env plugins and the optional capabilities of env plugins and of the envs they make."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

if TYPE_CHECKING:
    import threading

    import gymnasium as gym


@runtime_checkable
class EnvPlugin(Protocol):
    """Builds environments; constructed with its validated `env.*` config.

    The constructor checks the config and raises ConfigError for a bad value; it starts nothing.
    """

    Config: ClassVar[type]
    n_envs: int
    """Env instances an agent trains on."""

    def __init__(self, cfg: Any) -> None: ...
    def make(
        self, *, seed: int, index: int, evaluation: bool = False, render_mode: str | None = None
    ) -> gym.Env: ...


@runtime_checkable
class VectorEnvPlugin(EnvPlugin, Protocol):
    """An env plugin that runs many instances better together (game arenas sharing one connection):
    agents train on its vector env (same-step autoreset) instead of n single envs."""

    def make_vector(self, *, seed: int, n: int) -> gym.vector.VectorEnv: ...


@runtime_checkable
class VariantEnvPlugin(EnvPlugin, Protocol):
    """An env plugin with named evaluation variants (one per opponent, say): the run evaluates an
    agent on each and logs `eval/<variant>/<metric>`."""

    @property
    def eval_variants(self) -> tuple[str, ...]: ...
    def make_variant(self, variant: str, *, seed: int) -> gym.Env: ...


@runtime_checkable
class EpisodeStatsEnvPlugin(EnvPlugin, Protocol):
    """An env plugin that names, before any env is made, the `episode_stats` its envs report as an
    episode ends (a round's win_rate, damage_dealt; none for most gymnasium envs): with them the run
    knows every metric its evaluation will log, and refuses an objective that is none of them."""

    def episode_stat_names(self) -> tuple[str, ...]: ...


@runtime_checkable
class SpacesEnvPlugin(EnvPlugin, Protocol):
    """An env plugin that says its envs' observation and action spaces before a run starts (a plain
    gymnasium env makes one and closes it): an agent's `check_run` refuses, before a run exists,
    spaces it cannot train on."""

    def spaces(self) -> tuple[gym.Space[Any], gym.Space[Any]]: ...


@runtime_checkable
class RunWatchingEnvPlugin(EnvPlugin, Protocol):
    """An env plugin whose envs show the run to a person (a game page): given the run's stop flag
    and the step the run starts at (a resumed run's, else 0), its envs count the steps as the run
    does, and an env closed without an error can say whether the run finished or was stopped."""

    def watch_run(self, stop: threading.Event, *, start_step: int) -> None: ...


@runtime_checkable
class BestEpisodeReplay(Protocol):
    """An evaluation env (not a plugin: an env a plugin makes) that keeps its best episode and
    writes it as a video. With `eval.video` the run's final evaluation attaches that video
    instead of recording the first episodes frame by frame: the env keeps its own compact
    states while it plays and draws only the best episode's, once."""

    def keep_best_episode(self) -> None:
        """From now on keep the best episode (the highest return) that ends; forget any kept before."""
        ...

    def write_best_episode(self, folder: Path, name: str) -> Path | None:
        """Write the kept episode as a video `name` (with a suffix of the env's choosing) into
        `folder`; its path, or None when no episode ended since `keep_best_episode`."""
        ...
