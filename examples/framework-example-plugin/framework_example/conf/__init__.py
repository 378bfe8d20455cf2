"""Hydra config groups of the example plugin (found through the `framework.conf` entry point).

Importing it registers the plugin's schema as /schema_env_corridor, which env/corridor.yaml starts from.
"""

from framework.config import store_schema
from framework_example.config import CorridorConfig

store_schema("env", "corridor", CorridorConfig)
