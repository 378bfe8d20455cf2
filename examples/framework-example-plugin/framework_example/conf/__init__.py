"""Hydra config groups of the example plugin (found through the `framework.conf` entry point).

Importing it registers the plugins' schemas (/schema_env_corridor, /schema_agent_qtable), which
env/corridor.yaml and agent/qtable.yaml start from.
"""

from framework.config import store_schema
from framework_example.config import CorridorConfig, QTableConfig

store_schema("env", "corridor", CorridorConfig)
store_schema("agent", "qtable", QTableConfig)
