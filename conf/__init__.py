"""Hydra config groups of the built-in plugins (found through the `framework.conf` entry point)."""
