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
from framework.contracts.tracker import SweepSummarySpec, Tracker

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
