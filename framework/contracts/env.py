"""Env plugins and the optional capabilities of env plugins and of the envs they make."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

if TYPE_CHECKING:
    import threading

    import gymnasium as gym


@runtime_checkable
class EnvPlugin(Protocol):
    """Builds environments; its constructor checks the `env.*` config (ConfigError if bad), starts nothing."""

    Config: ClassVar[type]
    n_envs: int
    """Env instances an agent trains on."""

    def __init__(self, cfg: Any) -> None: ...
    def make(
        self, *, seed: int, index: int, evaluation: bool = False, render_mode: str | None = None
    ) -> gym.Env: ...


@runtime_checkable
class VectorEnvPlugin(EnvPlugin, Protocol):
    """An env plugin whose envs run best together: agents train on its vector env (same-step autoreset)."""

    def make_vector(self, *, seed: int, n: int) -> gym.vector.VectorEnv: ...


@runtime_checkable
class VariantEnvPlugin(EnvPlugin, Protocol):
    """An env plugin with named evaluation variants (opponents, say), logged as `eval/<variant>/<metric>`."""

    @property
    def eval_variants(self) -> tuple[str, ...]: ...
    def make_variant(self, variant: str, *, seed: int) -> gym.Env: ...


@runtime_checkable
class EpisodeStatsEnvPlugin(EnvPlugin, Protocol):
    """An env plugin that names, before any env is made, the `episode_stats` its envs report as an episode
    ends (win_rate, say): the run then refuses an objective its evaluation will not log."""

    def episode_stat_names(self) -> tuple[str, ...]: ...


@runtime_checkable
class SpacesEnvPlugin(EnvPlugin, Protocol):
    """An env plugin that gives its envs' observation and action spaces without making one (`check_run`)."""

    def spaces(self) -> tuple[gym.Space[Any], gym.Space[Any]]: ...


@runtime_checkable
class RunWatchingEnvPlugin(EnvPlugin, Protocol):
    """An env plugin whose envs show the run to a person (a game page): they count steps as the run does,
    from `start_step`, and an env closed without error can tell whether the run finished or was stopped."""

    def watch_run(self, stop: threading.Event, *, start_step: int) -> None: ...


@runtime_checkable
class BestEpisodeReplay(Protocol):
    """An evaluation env (one a plugin makes) that keeps its best episode and writes it as a video: with
    `eval.video` the final evaluation attaches it instead of recording the first episodes frame by frame."""

    def keep_best_episode(self) -> None:
        """From now on keep the best episode (the highest return) that ends; forget any kept before."""
        ...

    def write_best_episode(self, folder: Path, name: str) -> Path | None:
        """Write the kept episode as a video `name` (with a suffix of the env's choosing) into
        `folder`; its path, or None when no episode ended since `keep_best_episode`."""
        ...
