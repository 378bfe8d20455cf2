"""Each plugin kind's contract: a Protocol (no base class to inherit), one module per kind, re-exported here.
An optional capability extends its kind's Protocol (`VectorEnvPlugin`); `check` holds a plugin to it."""

from framework.contracts.agent import (
    Agent,
    CheckedAgent,
    EvaluatingAgent,
    MetricNamingAgent,
    RunContext,
    RunPart,
)
from framework.contracts.buffer import Buffer, FrameBuffer
from framework.contracts.check import (
    CAPABILITIES,
    CONTRACTS,
    ENV_CAPABILITIES,
    capabilities,
    capabilities_of,
    check,
    check_env,
    check_instance,
    contract_of,
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
from framework.contracts.kind import PluginKind
from framework.contracts.service import RunService
from framework.contracts.sweeper import SweeperPlugin, Trial
from framework.contracts.tracker import StoreTracker, SweepSummarySpec, Tracker

__all__ = [
    "CAPABILITIES",
    "CONTRACTS",
    "ENV_CAPABILITIES",
    "Agent",
    "BestEpisodeReplay",
    "Buffer",
    "CheckedAgent",
    "EnvPlugin",
    "EpisodeStatsEnvPlugin",
    "EvaluatingAgent",
    "FrameBuffer",
    "MetricNamingAgent",
    "PluginKind",
    "RunContext",
    "RunPart",
    "RunService",
    "RunWatchingEnvPlugin",
    "SpacesEnvPlugin",
    "StoreTracker",
    "SweepSummarySpec",
    "SweeperPlugin",
    "Tracker",
    "Trial",
    "VariantEnvPlugin",
    "VectorEnvPlugin",
    "capabilities",
    "capabilities_of",
    "check",
    "check_env",
    "check_instance",
    "contract_of",
]
