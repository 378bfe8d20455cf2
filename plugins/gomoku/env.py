"""A gymnasium env of Gomoku against a fixed opponent, for agents that do not search (PPO, DQN).

Observation: the 4 input planes from the agent's view (own stones, opponent stones, last move,
black to move). Action: a flat cell index; `info["action_mask"]` marks the empty cells, and an
illegal move loses the game. Reward +1 for a win, -1 for a loss, 0 otherwise.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from .kernels import BLACK, DRAW, N_PLANES, WIN
from .opponents import Opponent, make_opponent
from .rules import GameState, Gomoku

CELL_PX = 24


class GomokuEnv(gym.Env[np.ndarray, int]):
    """Gomoku against `opponent`; the agent's colour alternates by episode unless fixed."""

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 2}

    def __init__(
        self,
        game: Gomoku,
        opponent: str,
        *,
        seed: int,
        colour: str = "alternate",
        render_mode: str | None = None,
    ) -> None:
        self.game = game
        self.opponent: Opponent = make_opponent(opponent, game, seed)
        self.colour = colour
        self.render_mode = render_mode
        self.observation_space = gym.spaces.Box(0.0, 1.0, (N_PLANES, *game.board_shape), np.float32)
        self.action_space = gym.spaces.Discrete(game.n_actions)  # type: ignore[assignment]
        self.action_space.seed(seed)
        self.state: GameState = game.new_state()
        self.agent_colour = BLACK
        self._episode = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        if seed is not None:
            self.opponent = make_opponent(self.opponent.name, self.game, seed)
            self._episode = 0
        if self.colour == "alternate":
            self.agent_colour = BLACK if self._episode % 2 == 0 else -BLACK
        else:
            self.agent_colour = BLACK if self.colour == "black" else -BLACK
        self._episode += 1
        self.state = self.game.new_state()
        if self.agent_colour != BLACK:
            self.state.play(self.opponent.act(self.state))
        return self.state.planes(), self._info()

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        state = self.state
        if not (0 <= int(action) < self.game.n_actions) or not state.legal[int(action)]:
            info = {**self._info(), "illegal_move": True, "episode_stats": _stats(-1)}
            return state.planes(), -1.0, True, False, info
        outcome = state.play(int(action))
        if outcome == WIN:
            return state.planes(), 1.0, True, False, {**self._info(), "episode_stats": _stats(1)}
        if outcome == DRAW:
            return state.planes(), 0.0, True, False, {**self._info(), "episode_stats": _stats(0)}
        outcome = state.play(self.opponent.act(state))
        if outcome == WIN:
            return state.planes(), -1.0, True, False, {**self._info(), "episode_stats": _stats(-1)}
        if outcome == DRAW:
            return state.planes(), 0.0, True, False, {**self._info(), "episode_stats": _stats(0)}
        return state.planes(), 0.0, False, False, self._info()

    def _info(self) -> dict[str, Any]:
        return {"action_mask": self.state.legal.copy(), "agent_colour": self.agent_colour}

    def action_masks(self) -> np.ndarray:
        """The empty cells (sb3-contrib's MaskablePPO reads this)."""
        return self.state.legal.copy()

    def render(self) -> Any:
        if self.render_mode == "ansi":
            return self.state.render()
        if self.render_mode == "rgb_array":
            return draw_board(self.state)
        return None


#: The stats a game reports as it ends.
EPISODE_STATS = ("win", "draw", "loss")


def _stats(result: int) -> dict[str, float]:
    return dict(
        zip(EPISODE_STATS, (float(result == 1), float(result == 0), float(result == -1)), strict=True)
    )


def draw_board(state: GameState) -> np.ndarray:
    """An RGB picture of the board: wood, grid, black and white stones, the last move marked."""
    size = state.game.board_size
    px = CELL_PX * size
    image = np.empty((px, px, 3), dtype=np.uint8)
    image[:] = (220, 179, 92)
    centre = np.arange(size) * CELL_PX + CELL_PX // 2
    image[centre[0] : centre[-1] + 1, centre, :] = 60
    image[centre, centre[0] : centre[-1] + 1, :] = 60
    yy, xx = np.mgrid[0:CELL_PX, 0:CELL_PX] - CELL_PX // 2 + 0.5
    disc = xx**2 + yy**2 <= (CELL_PX * 0.42) ** 2
    for a in np.flatnonzero(state.board):
        x, y = state.game.to_xy(int(a))
        cell = image[y * CELL_PX : (y + 1) * CELL_PX, x * CELL_PX : (x + 1) * CELL_PX]
        cell[disc] = (20, 20, 20) if state.board[a] == BLACK else (240, 240, 240)
        if a == state.last_move:
            cell[(xx**2 + yy**2) <= 9] = (200, 30, 30)
    return image
