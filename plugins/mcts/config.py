"""The search engines' config schemas: every key, its default and its description (`search.<key>`)."""

from dataclasses import dataclass
from typing import Optional


@dataclass
class SequentialConfig:
    num_simulations: int = 400
    """Simulations per move: a root is searched until its children's visits add up to this
    (visits kept from the previous move's tree count)."""
    c_puct: float = 2.0
    """Exploration weight of PUCT: Q + c_puct · P · sqrt(N_parent) / (1 + N_child)."""
    fpu_value: Optional[float] = 0.0
    """An unvisited move's value (first-play urgency), from the mover's view: a number in [-1, 1]
    (0, a draw, as in AlphaZero), or null for its parent's value less fpu_reduction."""
    fpu_reduction: float = 0.2
    """With fpu_value null: how much less than its parent's value an unvisited move is worth."""
    dirichlet_alpha: float = 0.3
    """Concentration of the Dirichlet noise mixed into the start node's priors (self-play only)."""
    dirichlet_epsilon: float = 0.25
    """Weight of that noise: P = (1 − ε) · P + ε · Dir(α)."""
    reuse_tree: bool = True
    """Keep the subtree of the moves played since the last search of a game (its visits count)."""
    detect_wins: bool = True
    """A leaf where the player to move can win at once is scored as won without a network call."""
