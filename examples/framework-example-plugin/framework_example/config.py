"""The corridor env plugin's config schema: every key, its default and its description.

They live apart from the plugins so that composing a config (and `--help`) reads them without
importing gymnasium, numpy or anything else the plugins need.
"""

from dataclasses import dataclass, field

from framework.values import bounds


@dataclass
class CorridorConfig:
    length: int = 8
    """Cells in the corridor; the agent starts at the left end, the goal is the right end."""
    n_envs: int = 1
    """Parallel env instances an agent trains on."""
    max_steps: int = 50
    """Truncate an episode after this many steps."""


@dataclass
class QTableConfig:
    lr: float = field(default=0.5, metadata=bounds(gt=0, le=1))
    """Step size of each Q-value update."""
    gamma: float = field(default=0.95, metadata=bounds(ge=0, le=1))
    """Discount factor."""
    epsilon: float = field(default=0.5, metadata=bounds(ge=0, le=1))
    """Chance of a random action at the run's start; it falls linearly to epsilon_end at its end."""
    epsilon_end: float = field(default=0.05, metadata=bounds(ge=0, le=1))
    """Chance of a random action at the run's end."""
    decimals: int = field(default=3, metadata=bounds(ge=0, le=12))
    """Observations are rounded to this many decimals to make the table's states."""
