"""Gomoku: the rules (compiled, no torch), fixed opponents, and the env plugin `env=gomoku`."""
