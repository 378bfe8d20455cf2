"""Stable-Baselines3 algorithms (PPO, A2C, DQN, SAC, TD3, and sb3-contrib's) on any registered env."""
