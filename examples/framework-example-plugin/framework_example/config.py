"""The corridor env plugin's config schema: every key, its default and its description.

It lives apart from the env so that composing a config (and `--help`) reads it without importing
gymnasium or anything else the env needs.
"""

from dataclasses import dataclass


@dataclass
class CorridorConfig:
    length: int = 8
    """Cells in the corridor; the agent starts at the left end, the goal is the right end."""
    n_envs: int = 1
    """Parallel env instances an agent trains on."""
    max_steps: int = 50
    """Truncate an episode after this many steps."""
