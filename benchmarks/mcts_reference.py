"""The reference side of benchmarks/mcts_speed.py: a plain-Python AlphaZero MCTS on Gomoku, written the
way the popular public Gomoku AlphaZero projects write it (junxiaosong/AlphaZero_Gomoku's
mcts_alphaZero.py, alpha-zero-general): a Python object per node with a dict of children, a board
deep-copied every simulation."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence

N_IN_ROW = 5
C_PUCT = 2.0
FPU = 0.0
BLACK, WHITE = 1, -1
ONGOING, WIN, DRAW = 0, 1, 2
DIRECTIONS = ((1, 0), (0, 1), (1, 1), (1, -1))


class Board:
    """The board as junxiaosong/AlphaZero_Gomoku's game.Board keeps it: {cell: player} and the empty cells.

    Same rules as ours: black (+1) first, freestyle (n_in_row or more wins), checked through the
    last move only; a full board is a draw.
    """

    def __init__(self, size: int, n_in_row: int) -> None:
        self.size = size
        self.n_in_row = n_in_row
        self.states: dict[int, int] = {}
        self.availables = list(range(size * size))
        self.current_player = BLACK
        self.last_move = -1

    def do_move(self, move: int) -> int:
        """Play `move` for the side to move; the outcome (ONGOING, WIN or DRAW)."""
        player = self.current_player
        self.states[move] = player
        self.availables.remove(move)
        self.current_player = -player
        self.last_move = move
        if self.wins(move, player):
            return WIN
        if not self.availables:
            return DRAW
        return ONGOING

    def wins(self, move: int, player: int) -> bool:
        """Whether `player`'s stone at `move` (placed or not) makes a line of n_in_row or more."""
        size, states = self.size, self.states
        x, y = move % size, move // size
        for dx, dy in DIRECTIONS:
            count = 1
            u, v = x + dx, y + dy
            while 0 <= u < size and 0 <= v < size and states.get(v * size + u) == player:
                count += 1
                u, v = u + dx, v + dy
            u, v = x - dx, y - dy
            while 0 <= u < size and 0 <= v < size and states.get(v * size + u) == player:
                count += 1
                u, v = u - dx, v - dy
            if count >= self.n_in_row:
                return True
        return False

    def has_winning_move(self, player: int) -> bool:
        """Whether `player` can win at once: an empty cell next to one of their stones that wins."""
        size, states = self.size, self.states
        for cell, owner in states.items():
            if owner != player:
                continue
            x, y = cell % size, cell // size
            for v in range(max(y - 1, 0), min(y + 2, size)):
                for u in range(max(x - 1, 0), min(x + 2, size)):
                    c = v * size + u
                    if c not in states and self.wins(c, player):
                        return True
        return False


def uniform_policy(board: Board) -> tuple[list[tuple[int, float]], float]:
    """(action, prior) over the empty cells, all equal, and a value of 0 (the projects' rollout-free stub)."""
    p = 1.0 / len(board.availables)
    return [(a, p) for a in board.availables], 0.0


class Node:
    """A search node: children {action: node}, visits N, value sum W (mover-into-node's view), prior P."""

    __slots__ = ("N", "P", "W", "children", "terminal")

    def __init__(self, prior: float) -> None:
        self.children: dict[int, Node] = {}
        self.N = 0
        self.W = 0.0
        self.P = prior
        self.terminal: float | None = None
        """The value of a terminal leaf (mover-into-node's view), once known."""

    def expand(self, priors: list[tuple[int, float]]) -> None:
        self.children = {action: Node(p) for action, p in priors}

    def select(self, c_puct: float, fpu: float) -> tuple[int, Node]:
        """The child with the best PUCT score (the first of equals)."""
        sqrt_n = math.sqrt(self.N)
        best_score = -math.inf
        best: tuple[int, Node] | None = None
        for action, child in self.children.items():
            n = child.N
            q = child.W / n if n else fpu
            score = q + c_puct * child.P * sqrt_n / (1 + n)
            if score > best_score:
                best_score, best = score, (action, child)
        assert best is not None
        return best


class ReferenceMCTS:
    """PUCT search in the style of mcts_alphaZero.py: a fresh tree per search, a board copy per playout."""

    def __init__(
        self,
        num_simulations: int,
        *,
        policy: Callable[[Board], tuple[list[tuple[int, float]], float]] = uniform_policy,
        c_puct: float = C_PUCT,
        fpu: float = FPU,
        detect_wins: bool = True,
    ) -> None:
        self.num_simulations = num_simulations
        self.policy = policy
        self.c_puct = c_puct
        self.fpu = fpu
        self.detect_wins = detect_wins

    def search(self, board: Board) -> list[int]:
        """Visit counts of the root's moves, indexed by action, after num_simulations playouts."""
        root = Node(1.0)
        priors, value = self.policy(board)
        root.expand(priors)
        root.N, root.W = 1, -value
        for _ in range(self.num_simulations):
            self._playout(root, copy.deepcopy(board))
        counts = [0] * (board.size * board.size)
        for action, child in root.children.items():
            counts[action] = child.N
        return counts

    def _playout(self, root: Node, board: Board) -> None:
        node, path, outcome = root, [root], ONGOING
        while node.children:
            action, node = node.select(self.c_puct, self.fpu)
            outcome = board.do_move(action)
            path.append(node)
        if node.terminal is None:
            if outcome == WIN:
                node.terminal = 1.0
            elif outcome == DRAW:
                node.terminal = 0.0
            elif self.detect_wins and board.has_winning_move(board.current_player):
                node.terminal = -1.0  # the player to move wins next: lost for whoever moved here
        if node.terminal is not None:
            value = node.terminal
        else:
            priors, leaf_value = self.policy(board)
            node.expand(priors)
            value = -leaf_value  # the policy's value is the player to move's; nodes hold the mover's
        for visited in reversed(path):
            visited.N += 1
            visited.W += value
            value = -value


def reference_board(size: int, moves: Sequence[int]) -> Board:
    board = Board(size, N_IN_ROW)
    for move in moves:
        if board.do_move(move) != ONGOING:
            raise ValueError(f"moves {list(moves)} end the game")
    return board
