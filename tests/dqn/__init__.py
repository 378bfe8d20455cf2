"""Tests of our DQN agent plugin (plugins/dqn)."""
