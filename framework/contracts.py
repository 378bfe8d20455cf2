"""The contracts every plugin kind satisfies (structural: no base class to inherit).

Each kind is a Protocol that mypy checks plugins against; an optional capability is a Protocol of
its own that extends its kind's (`VectorEnvPlugin`, `FrameBuffer`), so that what a plugin can do
is declared and typed, never guessed. `check` holds a loaded plugin to its kind's contract.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

if TYPE_CHECKING:
    import gymnasium as gym
    import numpy as np

    from framework.context import RunContext


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


@runtime_checkable
class Buffer(Protocol):
    """A replay buffer: `insert` takes one transition by field name, `sample` a dict of batch arrays."""

    Config: ClassVar[type]
    capacity: int
    """Most transitions held."""

    def __init__(self, cfg: Any) -> None: ...
    def seed(self, seed: int) -> None: ...
    def insert(self, /, **transition: Any) -> None: ...
    def sample(self, batch_size: int) -> dict[str, np.ndarray]: ...
    def __len__(self) -> int: ...
    def state_dict(self) -> dict[str, Any]: ...
    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...


@runtime_checkable
class FrameBuffer(Buffer, Protocol):
    """A buffer that stores each frame once and stacks `frame_history_len` of them itself: an episode
    starts with `on_reset(frame)`, then `insert(action=, reward=, next_frame=, done=)` per step."""

    frame_history_len: int

    def on_reset(self, frame: np.ndarray) -> None: ...


@runtime_checkable
class Agent(Protocol):
    """Owns its training loop; uses the framework's services through the RunContext."""

    Config: ClassVar[type]

    def __init__(self, cfg: Any) -> None: ...
    def learn(self, ctx: RunContext) -> None: ...
    def act(self, obs: Any, *, deterministic: bool = True) -> Any: ...
    def save(self, path: Path) -> None: ...
    def load(self, path: Path) -> None: ...


@runtime_checkable
class SearchAgent(Agent, Protocol):
    """An agent that plays by tree search: its batched evaluator (on its current network) is what
    the run's inference service serves, and the run's searches evaluate through that service."""

    def evaluator(self) -> Evaluator: ...


@runtime_checkable
class EvaluatingAgent(Agent, Protocol):
    """An agent that evaluates itself (matches against opponents, say) instead of the run playing
    episodes of its `act`: metrics named `eval/...`, the run's objective among them."""

    def evaluate(self, ctx: RunContext, *, episodes: int) -> dict[str, float]: ...


@runtime_checkable
class CheckedAgent(Agent, Protocol):
    """An agent that can tell, before the run starts, that it cannot train with the run's other
    plugins (a buffer it cannot fill, say): `check_run` raises ConfigError naming what to change."""

    def check_run(self, *, env: EnvPlugin, buffer: Buffer | None, search: SearchPlugin | None) -> None: ...


class BoardState(Protocol):
    """A position of a two-player board game, as a search engine reads it."""

    board: np.ndarray
    """The cells, flat: 0 empty, +1 the first player's stones, -1 the second's."""
    to_play: int
    """+1 or -1: whose move it is."""
    moves: Sequence[int]
    """The actions played so far, in order (a search engine matches a new root to its last tree by them)."""


class Evaluator(Protocol):
    """A batched policy-value function: planes [B, C, H, W] float32 → (policy logits [B, A], values [B]).

    Values are from the view of the player to move in each position, in [-1, 1].
    """

    def __call__(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...


@runtime_checkable
class PortableEvaluator(Protocol):
    """An evaluator another process (a Ray actor) can rebuild and keep in step with this one.

    A service that evaluates elsewhere builds `portable()(device)` there and loads the weights
    published to it (`weights()` of a network, `load_weights` there).
    """

    def __call__(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...
    def portable(self) -> Callable[[str], PortableEvaluator]:
        """A picklable builder: `builder(device)` is the same function on `device`, its weights
        to be set by load_weights."""
        ...

    def weights(self) -> dict[str, np.ndarray]: ...
    def load_weights(self, weights: Mapping[str, np.ndarray]) -> None: ...


@runtime_checkable
class BoardGame(Protocol):
    """The rules of a two-player, alternating board game over flat action indices, for search.

    The hot loop of a search runs the game's C kernels (numba cfuncs over pointers: the board
    int8[n_actions], `params` int64[...], the planes float32[n_planes, H, W]):
    `apply_move(board, action, player, n_moves, params) -> 0 ongoing | 1 the mover won | 2 draw`,
    `winning_move(board, player, params) -> action or -1`, and
    `encode(board, player, last_move, params, out) -> 0`.
    """

    @property
    def name(self) -> str: ...
    @property
    def n_actions(self) -> int: ...
    @property
    def board_shape(self) -> tuple[int, int]: ...
    @property
    def n_planes(self) -> int: ...
    @property
    def params(self) -> np.ndarray: ...
    @property
    def apply_move(self) -> Any: ...
    @property
    def winning_move(self) -> Any: ...
    @property
    def encode(self) -> Any: ...
    @property
    def symmetry_index(self) -> np.ndarray:
        """[S, n_actions]: the board's symmetries; symmetry k maps a flat board b to b[..., symmetry_index[k]]
        (a policy over actions, or planes flattened over their cells)."""
        ...

    def new_state(self) -> Any: ...
    def state_from_planes(self, planes: np.ndarray) -> Any:
        """The position shown by input planes (what a gymnasium observation of the game holds)."""
        ...


class GameOpponent(Protocol):
    """A fixed player of a board game."""

    name: str

    def act(self, state: Any) -> int: ...


@runtime_checkable
class GameEnvPlugin(EnvPlugin, Protocol):
    """An env plugin of a board game: its rules for search-based agents, and its fixed opponents
    (those named in `eval_variants` among them) for their evaluation."""

    @property
    def game(self) -> BoardGame: ...
    @property
    def eval_variants(self) -> tuple[str, ...]: ...
    def opponent(self, name: str, *, seed: int) -> GameOpponent: ...


@runtime_checkable
class SearchEngine(Protocol):
    """Tree search over a batch of roots: visit counts back, everything released by close().

    Made by the run's search plugin over the run's inference service. Root i of each call is game
    slot i: a search may keep slot i's tree for the next call when the new root follows from the
    last by the moves since.
    """

    num_simulations: int
    """Simulations per root and call; a runner may change it between calls (a schedule)."""
    dirichlet_epsilon: float
    """Weight of the start node's Dirichlet noise; a runner may change it between calls."""
    version: int
    """The weights' version the last call began with: every evaluation it used was of it or newer."""
    simulations: int
    """Simulations run since it was made."""

    def search(self, roots: Sequence[BoardState], *, add_noise: bool = False) -> np.ndarray:
        """Visit counts [len(roots), n_actions]; `add_noise` mixes Dirichlet noise into each start
        node's priors (the root, or a kept root) and nowhere deeper."""
        ...

    @property
    def root_values(self) -> np.ndarray:
        """The last call's root values from the view of each root's player to move, [B]."""
        ...

    def perf_metrics(self) -> dict[str, float]:
        """Tuning figures (perf/search_sims_per_s, perf/batch_fill, ...) since the last call."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class InferenceService(Protocol):
    """The run's network, one service per run: every search of the run evaluates through it.

    It holds the network under model names (the one self-play uses, a candidate under gating),
    each with a version that `publish` raises; a search answers only with weights at least as new
    as the version current when it began.
    """

    def publish(self, model: str, weights: Mapping[str, np.ndarray]) -> int:
        """New weights for `model`; returns its new version."""
        ...

    def version(self, model: str) -> int: ...
    def close(self) -> None: ...


@runtime_checkable
class SearchPlugin(Protocol):
    """A kind of search: starts the run's inference service once, and makes searches over it."""

    Config: ClassVar[type]

    def __init__(self, cfg: Any) -> None: ...
    def start_inference(
        self, source: Callable[[], Evaluator], *, device: str, should_stop: Callable[[], bool]
    ) -> InferenceService:
        """The run's service for the network `source()` gives (a PortableEvaluator is rebuilt where
        it runs, and its weights published; another evaluator runs as it is). A wait it makes
        (a restarting actor) ends when `should_stop()` (Ctrl-C)."""
        ...

    def make(self, *, game: BoardGame, inference: Any, model: str, seed: int) -> SearchEngine:
        """A search of `game` evaluating with `model` of the service."""
        ...


@runtime_checkable
class Measured(Protocol):
    """Something that reports tuning figures (a search, distributed self-play)."""

    def perf_metrics(self) -> dict[str, float]:
        """The figures since the last call (empty when nothing was searched), then starts anew."""
        ...


@runtime_checkable
class SelfPlaySource(Protocol):
    """Where self-play games come from: a runner in this process, or workers elsewhere."""

    def configure(self, settings: Mapping[str, float]) -> None:
        """The runner's settings from now on (temperature, dirichlet_epsilon, num_simulations)."""
        ...

    def step(self) -> tuple[int, list[Any]]:
        """(moves played since the last call, records of the games that ended)."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class DistributedSearch(Protocol):
    """A search plugin that can run self-play in workers of its own (Ray actors, say)."""

    def self_play(
        self,
        inference: Any,
        make_runner: Callable[[Any, int], SelfPlaySource],
        *,
        game: BoardGame,
        seed: int,
        should_stop: Callable[[], bool],
    ) -> SelfPlaySource | None:
        """A source whose workers each play `make_runner(their search, their seed)` over the run's
        inference service; None when the config plays in this process. `make_runner` must be
        picklable (a module-level function or a partial of one)."""
        ...


@dataclass(frozen=True)
class SweepSummarySpec:
    """What the parent run of a sweep summarises when the sweep ends."""

    swept_keys: tuple[str, ...]
    objective: str
    """The metric each child is judged by."""
    mode: str
    """max or min: which end of the objective is best."""
    also: tuple[str, ...] = ()
    """More metrics to summarise beside the objective (a table column and a heat map each)."""


@runtime_checkable
class Tracker(Protocol):
    """Experiment tracking: one run at a time, plus the parent run of a sweep.

    Logging calls may be asynchronous; `run_id` waits until the run exists, and `end_run`
    returns once everything logged is stored. Times are seconds since the epoch.
    """

    Config: ClassVar[type]

    def __init__(self, cfg: Any) -> None: ...
    @property
    def run_id(self) -> str: ...
    def start_run(
        self,
        *,
        run_name: str | None,
        tags: Mapping[str, str],
        parent_run_id: str | None = None,
        resume_run_id: str | None = None,
        start_time: float | None = None,
    ) -> None: ...
    def log_params(self, params: Mapping[str, Any]) -> None: ...
    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None: ...
    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None: ...
    def set_tags(self, tags: Mapping[str, str]) -> None: ...
    def end_run(self, status: str, *, end_time: float | None = None) -> None: ...
    def run_tags(self, run_id: str) -> dict[str, str]: ...
    def download_artifacts(self, run_id: str, path: str, dst: Path) -> Path: ...
    def how_to_view(self, run_id: str) -> str: ...
    def start_parent(
        self,
        *,
        run_name: str,
        tags: Mapping[str, str],
        params: Mapping[str, str],
        start_time: float | None = None,
    ) -> str: ...
    def end_parent(
        self, run_id: str, status: str, *, summary: SweepSummarySpec, end_time: float | None = None
    ) -> str:
        """End the parent run, with its summary; returns what to tell the user ('' for nothing)."""
        ...

    def close(self) -> None: ...


#: The contract of each plugin kind, and the optional capabilities a plugin of that kind may have.
CONTRACTS: dict[str, type] = {
    "env": EnvPlugin,
    "buffer": Buffer,
    "agent": Agent,
    "search": SearchPlugin,
    "tracker": Tracker,
}
CAPABILITIES: dict[str, tuple[type, ...]] = {
    "env": (VectorEnvPlugin, VariantEnvPlugin, GameEnvPlugin),
    "buffer": (FrameBuffer,),
    "agent": (CheckedAgent, SearchAgent, EvaluatingAgent),
    "search": (DistributedSearch,),
}
#: Optional capabilities of the envs an env plugin makes (gymnasium is their contract).
ENV_CAPABILITIES: tuple[type, ...] = (BestEpisodeReplay,)


def check(kind: str, plugin: object) -> list[str]:
    """What `plugin` (a class) lacks of its kind's contract, one line each; [] when it conforms.

    Methods must exist and accept every call the contract allows (the same parameter names,
    kinds and defaults, no other required parameter); `Config` must be a dataclass. Attributes
    (`n_envs`, `capacity`) belong to instances and are checked by `check_instance`.
    """
    contract = CONTRACTS[kind]
    if not inspect.isclass(plugin):
        return [f"is a {type(plugin).__name__}, not a class"]
    problems = []
    config = getattr(plugin, "Config", None)
    if config is None or not dataclasses.is_dataclass(config):
        problems.append("Config is not a dataclass (the schema of its config section)")
    for name, expected in _methods(contract).items():
        if isinstance(expected, property):  # may be an instance attribute: see check_instance
            continue
        actual = inspect.getattr_static(plugin, name, None)
        if actual is None:
            problems.append(f"has no {name}{_signature(expected)}")
        elif not callable(actual) and not isinstance(actual, property):
            problems.append(f"{name} is not a method")
        else:
            mismatch = _accepts(expected, getattr(plugin, name))
            if mismatch:
                problems.append(f"{name}{_signature(getattr(plugin, name))}: {mismatch}")
    return problems


def check_env(env: object) -> list[str]:
    """What an env (or env class) lacks of the env capabilities it claims, by having any of their
    methods: one line each, [] when it keeps them all."""
    klass = env if inspect.isclass(env) else type(env)
    problems = []
    for capability in ENV_CAPABILITIES:
        # An env is built by its plugin, however it likes: no constructor is part of the contract.
        methods = {n: m for n, m in _methods(capability).items() if n != "__init__"}
        if not any(hasattr(klass, name) for name in methods):
            continue
        for name, expected in methods.items():
            actual = getattr(klass, name, None)
            if actual is None or not callable(actual):
                problems.append(f"has no {name}{_signature(expected)} ({capability.__name__})")
            else:
                mismatch = _accepts(expected, actual)
                if mismatch:
                    problems.append(f"{name}{_signature(actual)}: {mismatch}")
    return problems


def check_instance(kind: str, plugin: object) -> list[str]:
    """What a constructed plugin lacks of the attributes its contract (and capabilities) declare."""
    contracts = (CONTRACTS[kind], *(c for c in CAPABILITIES.get(kind, ()) if isinstance(plugin, c)))
    problems = []
    for contract in contracts:
        properties = [n for n, v in _methods(contract).items() if isinstance(v, property)]
        for name in [*_attributes(contract), *properties]:
            if inspect.getattr_static(plugin, name, _MISSING) is _MISSING:
                problems.append(f"has no attribute {name} ({contract.__name__})")
    return problems


_MISSING = object()


def capabilities(kind: str, plugin: object) -> list[str]:
    """The optional capabilities (Protocol names) whose methods a plugin class has."""
    found = []
    for capability in CAPABILITIES.get(kind, ()):
        extra = set(_methods(capability)) - set(_methods(CONTRACTS[kind]))
        if all(inspect.getattr_static(plugin, name, None) is not None for name in extra):
            found.append(capability.__name__)
    return found


def _methods(contract: type) -> dict[str, Any]:
    members: dict[str, Any] = {}
    for klass in reversed(contract.__mro__):
        if klass is object or klass is Protocol or not getattr(klass, "_is_protocol", False):
            continue
        for name, value in vars(klass).items():
            if (name == "__init__" or not name.startswith("_") or name == "__len__") and (
                callable(value) or isinstance(value, property)
            ):
                members[name] = value
    return members


def _attributes(contract: type) -> list[str]:
    names: list[str] = []
    for klass in reversed(contract.__mro__):
        for name in getattr(klass, "__annotations__", {}):
            if name != "Config" and not name.startswith("_") and name not in names:
                names.append(name)
    return names


def _signature(fn: Callable[..., Any]) -> str:
    try:
        return str(inspect.signature(fn))
    except (TypeError, ValueError):
        return "(...)"


def _accepts(expected: Callable[..., Any], actual: Callable[..., Any]) -> str:
    """'' when `actual` accepts every call `expected` allows; else what it does not accept."""
    try:
        want = inspect.signature(expected)
        have = inspect.signature(actual)
    except (TypeError, ValueError):
        return ""
    params = list(have.parameters.values())
    var_kw = any(p.kind is p.VAR_KEYWORD for p in params)
    var_pos = any(p.kind is p.VAR_POSITIONAL for p in params)
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    by_name = {p.name: p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    used: set[str] = set()
    index = 0
    for p in want.parameters.values():
        if p.kind is p.VAR_KEYWORD:
            if not var_kw:
                return f"does not take **{p.name} (the contract says {want})"
            continue
        if p.kind is p.VAR_POSITIONAL:
            if not var_pos:
                return f"does not take *{p.name} (the contract says {want})"
            continue
        if p.kind is p.KEYWORD_ONLY:
            mine = by_name.get(p.name)
            if mine is None and not var_kw:
                return f"has no keyword parameter {p.name} (the contract says {want})"
        else:  # positional in the contract
            if index < len(positional):
                mine = positional[index]
            elif var_pos:
                mine = None
            else:
                return f"takes too few positional parameters (the contract says {want})"
            index += 1
            if p.kind is p.POSITIONAL_OR_KEYWORD and mine is not None and mine.name != p.name:
                return f"names parameter {mine.name!r} where the contract says {p.name!r} ({want})"
        if mine is not None:
            used.add(mine.name)
            if p.default is not p.empty and mine.default is p.empty:
                return f"requires {mine.name}, which the contract makes optional ({want})"
    for p in params:
        required = p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        if required and p.name not in used:
            return f"requires {p.name}, which the contract does not pass ({want})"
    return ""
