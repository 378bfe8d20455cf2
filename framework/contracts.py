"""The contracts every plugin kind satisfies (structural: no base class to inherit)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

if TYPE_CHECKING:
    import gymnasium as gym
    import numpy as np

    from framework.context import RunContext


@runtime_checkable
class EnvPlugin(Protocol):
    """Builds environments; constructed with its validated `env.*` config.

    It may also offer `make_vector(*, seed, n) -> gymnasium.vector.VectorEnv` (same-step
    autoreset) when it runs many instances better together, e.g. game arenas sharing one
    connection; agents then use that instead of n single envs.
    """

    Config: ClassVar[type]

    def make(
        self, *, seed: int, index: int, evaluation: bool = False, render_mode: str | None = None
    ) -> gym.Env: ...


@runtime_checkable
class Buffer(Protocol):
    def insert(self, /, **transition: np.ndarray) -> None: ...
    def sample(self, batch_size: int) -> dict[str, np.ndarray]: ...
    def __len__(self) -> int: ...
    def state_dict(self) -> dict: ...
    def load_state_dict(self, state: dict) -> None: ...


@runtime_checkable
class Agent(Protocol):
    """Owns its training loop; uses the framework's services through the RunContext."""

    Config: ClassVar[type]

    def learn(self, ctx: RunContext) -> None: ...
    def act(self, obs: Any, *, deterministic: bool = True) -> Any: ...
    def save(self, path: Path) -> None: ...
    def load(self, path: Path) -> None: ...


@runtime_checkable
class SearchEngine(Protocol):
    def search(self, roots: Sequence[Any], *, add_noise: bool) -> np.ndarray: ...
    def close(self) -> None: ...


@runtime_checkable
class Tracker(Protocol):
    """Experiment tracking: one run at a time, plus the parent run of a sweep.

    Logging calls may be asynchronous; `run_id` waits until the run exists, and `end_run`
    returns once everything logged is stored.
    """

    Config: ClassVar[type]

    @property
    def run_id(self) -> str: ...
    def start_run(
        self,
        *,
        run_name: str | None,
        tags: Mapping[str, str],
        parent_run_id: str | None = None,
        resume_run_id: str | None = None,
    ) -> None: ...
    def log_params(self, params: Mapping[str, Any]) -> None: ...
    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None: ...
    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None: ...
    def set_tags(self, tags: Mapping[str, str]) -> None: ...
    def end_run(self, status: str) -> None: ...
    def run_tags(self, run_id: str) -> dict[str, str]: ...
    def download_artifacts(self, run_id: str, path: str, dst: Path) -> Path: ...
    def start_parent(self, *, run_name: str, tags: Mapping[str, str]) -> str: ...
    def end_parent(self, run_id: str, status: str) -> None: ...
    def close(self) -> None: ...
