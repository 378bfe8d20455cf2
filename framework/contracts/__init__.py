"""The contracts every plugin kind satisfies (structural: no base class to inherit).

Each kind is a Protocol that mypy checks plugins against; an optional capability is a Protocol of
its own that extends its kind's (`VectorEnvPlugin`, `FrameBuffer`), so that what a plugin can do
is declared and typed, never guessed. `check` holds a loaded plugin to its kind's contract.
One module per kind; every public name is re-exported here (`from framework.contracts import Agent`).
"""

from framework.contracts.agent import (
    Agent,
    CheckedAgent,
    EvaluatingAgent,
    MetricNamingAgent,
    RunContext,
    SearchAgent,
)
from framework.contracts.buffer import Buffer, FrameBuffer
from framework.contracts.check import (
    CAPABILITIES,
    CONTRACTS,
    ENV_CAPABILITIES,
    capabilities,
    check,
    check_env,
    check_instance,
)
from framework.contracts.env import (
    BestEpisodeReplay,
    EnvPlugin,
    EpisodeStatsEnvPlugin,
    RunWatchingEnvPlugin,
    SpacesEnvPlugin,
    VariantEnvPlugin,
    VectorEnvPlugin,
)
from framework.contracts.game import (
    BoardGame,
    BoardState,
    Evaluator,
    GameEnvPlugin,
    GameOpponent,
    PortableEvaluator,
    SolvingGame,
)
from framework.contracts.search import (
    BEST,
    DistributedSearch,
    DrawWeighingSearch,
    InferenceService,
    Measured,
    SearchEngine,
    SearchPlugin,
    SearchRequest,
    SearchResult,
    SelfPlaySource,
    SharedInference,
)
from framework.contracts.service import RunService
from framework.contracts.sweeper import SweeperPlugin, Trial
from framework.contracts.tracker import SweepSummarySpec, Tracker

__all__ = [
    "BEST",
    "CAPABILITIES",
    "CONTRACTS",
    "ENV_CAPABILITIES",
    "Agent",
    "BestEpisodeReplay",
    "BoardGame",
    "BoardState",
    "Buffer",
    "CheckedAgent",
    "DistributedSearch",
    "DrawWeighingSearch",
    "EnvPlugin",
    "EpisodeStatsEnvPlugin",
    "EvaluatingAgent",
    "Evaluator",
    "FrameBuffer",
    "GameEnvPlugin",
    "GameOpponent",
    "InferenceService",
    "Measured",
    "MetricNamingAgent",
    "PortableEvaluator",
    "RunContext",
    "RunService",
    "RunWatchingEnvPlugin",
    "SearchAgent",
    "SearchEngine",
    "SearchPlugin",
    "SearchRequest",
    "SearchResult",
    "SelfPlaySource",
    "SharedInference",
    "SolvingGame",
    "SpacesEnvPlugin",
    "SweepSummarySpec",
    "SweeperPlugin",
    "Tracker",
    "Trial",
    "VariantEnvPlugin",
    "VectorEnvPlugin",
    "capabilities",
    "check",
    "check_env",
    "check_instance",
]
