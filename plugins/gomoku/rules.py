"""Gomoku's rules: the game object search engines use, over the compiled kernels (`kernels`).

A board is an int8 array of n*n cells (0 empty, +1 black, -1 white); action `a` is the cell at
row `a // n`, column `a % n`; (x, y) = (column, row) appear only at the edges (display,
protocols). Black moves first. A move is checked for a win through that move only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .kernels import (
    BLACK,
    N_PLANES,
    ONGOING,
    RULES,
    WHITE,
    WIN,
    apply_move,
    apply_move_c,
    encode,
    encode_c,
    winning_move,
    winning_move_c,
)
from .threats import forced_win_c


@dataclass(frozen=True)
class Gomoku:
    """The rules of one Gomoku variant, and what a search engine needs of them.

    A search engine runs the game through its compiled kernels (`apply_move`, `encode`), which
    take `params`; everything else here is for code outside the hot loop.
    """

    board_size: int = 15
    n_in_row: int = 5
    rule: str = "freestyle"
    """freestyle (n or more in a row wins) or exact (exactly n: an overline does not win)."""

    def __post_init__(self) -> None:
        if self.rule not in RULES:
            raise ValueError(f"rule={self.rule!r} is not a Gomoku rule; choose one of {', '.join(RULES)}")
        if not 3 <= self.board_size <= 32:
            raise ValueError(f"board_size={self.board_size} is out of range; a board is 3 to 32 cells wide")
        if not 3 <= self.n_in_row <= self.board_size:
            raise ValueError(
                f"n_in_row={self.n_in_row} does not fit on a {self.board_size}x{self.board_size} board "
                f"(board_size={self.board_size}): it must be from 3 to board_size"
            )

    @property
    def name(self) -> str:
        exact = ", exactly" if self.rule == "exact" else ""
        return f"gomoku {self.board_size}x{self.board_size}{exact} {self.n_in_row} in a row"

    @property
    def spec(self) -> dict[str, Any]:
        return {"board_size": self.board_size, "n_in_row": self.n_in_row, "rule": self.rule}

    @property
    def n_actions(self) -> int:
        return self.board_size * self.board_size

    @property
    def board_shape(self) -> tuple[int, int]:
        return (self.board_size, self.board_size)

    @property
    def n_planes(self) -> int:
        return N_PLANES

    @property
    def params(self) -> np.ndarray:
        return np.array([self.board_size, self.n_in_row, int(self.rule == "exact")], dtype=np.int64)

    @property
    def apply_move(self) -> object:
        """The C kernel `apply_move(board*, action, player, n_moves, params*) -> outcome`."""
        return apply_move_c

    @property
    def winning_move(self) -> object:
        """The C kernel `winning_move(board*, player, params*) -> action or -1`."""
        return winning_move_c

    @property
    def forced_win(self) -> object:
        """The C kernel `forced_win(board*, player, params*) -> action or -1`: the first move of a
        victory by continuous fours (threats.py)."""
        return forced_win_c

    @property
    def encode(self) -> object:
        """The C kernel `encode(board*, player, last_move, params*, out*)`, out [N_PLANES, n, n] float32."""
        return encode_c

    def new_state(self) -> GameState:
        return GameState(self)

    @property
    def symmetry_index(self) -> np.ndarray:
        """[8, n*n]: symmetry k maps any flat board array b to b[..., symmetry_index[k]]."""
        from .symmetries import tables

        return tables(self.board_size)[0]

    def state_from_planes(self, planes: np.ndarray) -> GameState:
        """The position the input planes show (the order of earlier moves is lost; the last is kept)."""
        planes = np.asarray(planes)
        if planes.shape != (N_PLANES, *self.board_shape):
            raise ValueError(
                f"planes of shape {planes.shape}; this game's are {(N_PLANES, *self.board_shape)}"
            )
        state = GameState(self)
        me = BLACK if planes[3].any() else WHITE
        state.board[:] = np.where(planes[0].ravel() > 0, me, np.where(planes[1].ravel() > 0, -me, 0))
        state.legal[:] = state.board == 0
        state.to_play = me
        last = int(planes[2].argmax()) if planes[2].any() else -1
        stones = [int(a) for a in np.flatnonzero(state.board) if a != last]
        state.moves = [*stones, last] if last >= 0 else stones
        return state

    def to_xy(self, action: int) -> tuple[int, int]:
        return action % self.board_size, action // self.board_size

    def random_opening(self, rng: np.random.Generator, stones: int = 2) -> list[int]:
        """`stones` random moves (Black first) in the board's central region (its middle half, at
        least 3x3 cells) that leave neither side a win in one."""
        size = self.board_size
        half = max(size // 4, 1)
        low, high = max(size // 2 - half, 0), min(size // 2 + half, size - 1)
        centre = [y * size + x for y in range(low, high + 1) for x in range(low, high + 1)]
        if stones > len(centre):
            raise ValueError(
                f"an opening of {stones} stones does not fit the centre of a {size}x{size} board"
            )
        while True:
            moves = [int(m) for m in rng.choice(centre, size=stones, replace=False)]
            state = GameState.from_moves(self, moves)
            quiet = all(winning_move(state.board, who, self.params) < 0 for who in (BLACK, WHITE))
            if not state.done and quiet:
                return moves

    def from_xy(self, x: int, y: int) -> int:
        if not (0 <= x < self.board_size and 0 <= y < self.board_size):
            raise ValueError(f"({x}, {y}) is off the {self.board_size}x{self.board_size} board")
        return y * self.board_size + x


class GameState:
    """A position: the board, the side to move, the moves so far and the outcome; `play` mutates."""

    __slots__ = ("board", "game", "legal", "moves", "outcome", "to_play", "winner")

    def __init__(self, game: Gomoku) -> None:
        self.game = game
        self.board = np.zeros(game.n_actions, dtype=np.int8)
        self.legal = np.ones(game.n_actions, dtype=bool)
        """Empty cells (all False once the game is over), kept move by move."""
        self.to_play = BLACK
        self.moves: list[int] = []
        self.outcome = ONGOING
        self.winner = 0

    @property
    def last_move(self) -> int:
        return self.moves[-1] if self.moves else -1

    @property
    def done(self) -> bool:
        return self.outcome != ONGOING

    def play(self, action: int) -> int:
        """Play `action` for the side to move; returns the outcome. An illegal move is a ValueError."""
        action = int(action)
        if self.done:
            raise ValueError(f"move {action}: the game is over")
        if not (0 <= action < self.game.n_actions) or not self.legal[action]:
            x, y = self.game.to_xy(action)
            raise ValueError(f"move {action} (x={x}, y={y}) is not legal: the cell is taken or off the board")
        player = self.to_play
        self.outcome = int(apply_move(self.board, action, player, len(self.moves), self.game.params))
        self.moves.append(action)
        self.legal[action] = False
        self.to_play = -player
        if self.outcome == WIN:
            self.winner = player
        if self.done:
            self.legal[:] = False
        return self.outcome

    def copy(self) -> GameState:
        other = GameState.__new__(GameState)
        other.game, other.to_play, other.outcome, other.winner = (
            self.game,
            self.to_play,
            self.outcome,
            self.winner,
        )
        other.board, other.legal, other.moves = self.board.copy(), self.legal.copy(), list(self.moves)
        return other

    def planes(self) -> np.ndarray:
        """The N_PLANES input planes from the view of the side to move."""
        out = np.empty((N_PLANES, *self.game.board_shape), dtype=np.float32)
        encode(self.board, self.to_play, self.last_move, self.game.params, out)
        return out

    def winning_line(self) -> list[int]:
        """The cells of the winning row through the last move (the longest, if more than one); []
        where the last move won nothing."""
        game, board, last = self.game, self.board, self.last_move
        if last < 0:
            return []
        size, player = game.board_size, int(board[last])
        x0, y0 = game.to_xy(last)
        best: list[int] = []
        for dx, dy in ((1, 0), (0, 1), (1, 1), (1, -1)):
            cells = [last]
            for sign in (1, -1):
                x, y = x0 + sign * dx, y0 + sign * dy
                while 0 <= x < size and 0 <= y < size and board[y * size + x] == player:
                    cells.append(y * size + x)
                    x, y = x + sign * dx, y + sign * dy
            if len(cells) >= game.n_in_row and len(cells) > len(best):
                best = sorted(cells)
        return best

    @classmethod
    def from_moves(cls, game: Gomoku, moves: list[int]) -> GameState:
        state = cls(game)
        for move in moves:
            state.play(move)
        return state

    def __repr__(self) -> str:
        return f"GameState({self.game.name}, moves={self.moves})"

    def render(self) -> str:
        """The board as text: X black, O white, . empty; the last move in brackets."""
        size, symbols = self.game.board_size, {0: ".", 1: "X", -1: "O"}
        rows = []
        for y in range(size):
            cells = []
            for x in range(size):
                a = y * size + x
                mark = symbols[int(self.board[a])]
                cells.append(f"[{mark}]" if a == self.last_move else f" {mark} ")
            rows.append(f"{y:2d} " + "".join(cells))
        header = "   " + "".join(f"{x:^3d}" for x in range(size))
        return "\n".join([header, *rows])
