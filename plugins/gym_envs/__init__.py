"""Gymnasium environments: any env id, CartPole, LunarLander and Atari games."""
