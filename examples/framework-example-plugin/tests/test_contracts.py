"""The example's plugins held to their kinds' contracts, as a plugin package's own tests hold its plugins
(the core refuses a plugin that breaks its contract when a run loads it; this says so before)."""

import gymnasium as gym
from framework_example.config import QTableConfig
from framework_example.corridor import Corridor, CorridorConfig
from framework_example.qtable import QTable

from framework import contracts


def test_the_plugin_classes_keep_their_kinds_contracts():
    assert contracts.check("env", Corridor) == []
    assert contracts.check("agent", QTable) == []


def test_built_they_have_the_contracts_attributes_and_the_env_plugin_makes_gymnasium_envs():
    env_plugin = Corridor(CorridorConfig())
    assert contracts.check_instance("env", env_plugin) == []
    env = env_plugin.make(seed=0, index=0)
    assert isinstance(env, gym.Env) and contracts.check_env(env) == []
    assert contracts.check_instance("agent", QTable(QTableConfig())) == []
