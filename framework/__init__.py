"""framework: plugin-based reinforcement-learning experiments, composed by Hydra, tracked in MLflow."""

__version__ = "0.1.0"
