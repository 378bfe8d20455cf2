"""Hydra config groups of the built-in plugins (found through the `framework.conf` entry point).

Importing this package registers the plugins' schemas, which hold every key's default and
description; the YAML files here start from them and set only what differs.
"""

from framework.config import store_schema
from framework_plugins.alphazero.config import AlphaZeroConfig
from framework_plugins.buffers.config import MemoryEfficientReplayBufferConfig, ReplayBufferConfig
from framework_plugins.dqn.config import DQNConfig
from framework_plugins.fighter.config import FighterConfig
from framework_plugins.gomoku.config import GomokuConfig
from framework_plugins.gym_envs.config import AtariConfig, CartPoleConfig, GymConfig, LunarLanderConfig
from framework_plugins.mcts.config import RayAsyncConfig, SequentialConfig
from framework_plugins.sb3.config import SB3Config
from framework_plugins.trackers.mlflow_tracker import MlflowConfig
from framework_plugins.trackers.null_tracker import NullTrackerConfig

for section, name, schema in (
    ("env", "gym", GymConfig),
    ("env", "cartpole", CartPoleConfig),
    ("env", "lunarlander", LunarLanderConfig),
    ("env", "atari", AtariConfig),
    ("env", "fighter", FighterConfig),
    ("env", "gomoku", GomokuConfig),
    ("search", "sequential", SequentialConfig),
    ("search", "ray_async", RayAsyncConfig),
    ("agent", "alphazero", AlphaZeroConfig),
    ("buffer", "replay", ReplayBufferConfig),
    ("buffer", "memory_efficient", MemoryEfficientReplayBufferConfig),
    ("agent", "dqn", DQNConfig),
    ("agent", "sb3", SB3Config),
    ("tracking", "mlflow", MlflowConfig),
    ("tracking", "none", NullTrackerConfig),
):
    store_schema(section, name, schema)
