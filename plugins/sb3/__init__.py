"""Stable-Baselines3 algorithms (PPO, A2C, DQN, SAC, TD3, and sb3-contrib's) on any registered env."""

from .agent import SB3Agent, SB3Config

__all__ = ["SB3Agent", "SB3Config"]
