"""The Gomoku env plugin's config schema: every key, its default and its description (`env.<key>`)."""

# List[...] in schemas: OmegaConf 2.3 cannot read PEP 585 generics.
from dataclasses import dataclass, field
from typing import List

from framework.values import bounds

COLOURS = ("alternate", "black", "white")


@dataclass
class GomokuConfig:
    board_size: int = field(default=15, metadata=bounds(ge=3, le=32))
    """Cells per side of the square board."""
    n_in_row: int = field(default=5, metadata=bounds(ge=3, le=32))
    """Stones in a row that win."""
    rule: str = "freestyle"
    """freestyle (n or more in a row wins) or exact (exactly n; an overline does not win)."""
    opponent: str = "heuristic"
    """The fixed opponent an agent trains against as a gymnasium env (agent=ppo, agent=dqn): random,
    heuristic (wins, blocks, extends), mcts (pure MCTS, 1,000 random rollouts a move), mcts<N>, or
    alphabeta<D> (a D-ply alpha-beta search over a pattern evaluation; alphabeta: 2 plies)."""
    eval_opponents: List[str] = field(default_factory=lambda: ["random", "heuristic", "mcts1000"])
    """Opponents every evaluation plays, each logged as eval/<opponent>/win_rate, draw_rate,
    loss_rate, score (win = 1, draw = 1/2) and elo_diff."""
    eval_opening_stones: int = field(default=2, metadata=bounds(ge=0))
    """Stones of the random opening each pair of a search agent's evaluation games starts from
    (the pair swaps colours; 0: every game from the empty board)."""
    colour: str = "alternate"
    """The agent's colour in the gymnasium env: alternate (black in even episodes), black or white."""
    n_envs: int = field(default=1, metadata=bounds(ge=1))
    """Parallel env instances an agent trains on (gymnasium env agents)."""
