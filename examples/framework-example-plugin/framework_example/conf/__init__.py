"""Hydra config groups of the example plugin (found through the `framework.conf` entry point)."""
