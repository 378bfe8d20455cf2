"""FightingEnv: the fighter game as a gymnasium env (observation, reward, rendering)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from . import rules
from .rules import S
from .transports import InProcessTransport, Transport
from .webrtc import PeerGone

#: Observation layout, documented field by field (README and `FightingEnv.observation_fields`).
FIGHTER_FIELDS = (
    "x",  # position / stage width, 0..1
    "y",  # height / jump peak, 0..~1
    "vx",  # horizontal speed / walk speed (knockback exceeds 1)
    "vy",  # vertical speed / jump velocity, -1..1
    "hp",  # health / max health, 0..1
    "facing",  # +1 facing right, -1 facing left
    *(f"state_{name}" for name in rules.load_constants()["states"]),  # one-hot state
    "cooldown",  # special-move cooldown left / its full cooldown, 0..1
    "timer",  # frames left in a timed state (attack, hit-stun, block-stun) / 30
)
OBSERVATION_FIELDS = (
    *(f"self_{f}" for f in FIGHTER_FIELDS),
    *(f"opponent_{f}" for f in FIGHTER_FIELDS),
    "distance",  # (opponent x - own x) / stage width, -1..1
    "time_left",  # 1 at the start of the round, 0 when the timer runs out
)


class FightingEnv(gym.Env[np.ndarray, np.int64]):
    """One round per episode against a scripted opponent; the agent is fighter 0."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 15}

    def __init__(
        self,
        *,
        opponent: str = "aggressive",
        damage_reward: float = 1.0,
        win_reward: float = 1.0,
        render_mode: str | None = None,
        transport: Transport | None = None,
        reconnect_timeout_s: float = 0.0,
    ) -> None:
        self.C = rules.load_constants()
        if opponent not in self.C["opponents"]:
            raise ValueError(
                f"env.opponent={opponent!r} is not valid; choose one of {', '.join(self.C['opponents'])}"
            )
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode={render_mode!r} is not supported; use rgb_array or None")
        self.opponent = opponent
        self.damage_reward = damage_reward
        self.win_reward = win_reward
        self.render_mode = render_mode
        self.action_space = gym.spaces.Discrete(len(self.C["actions"]))
        self.observation_space = gym.spaces.Box(-4.0, 4.0, shape=(len(OBSERVATION_FIELDS),), dtype=np.float32)
        self.observation_fields = OBSERVATION_FIELDS
        self.transport = transport if transport is not None else InProcessTransport()
        self.reconnect_timeout_s = reconnect_timeout_s
        self.game: rules.Game = rules.new_game(self.C, 0, opponent)
        self._dealt = [0, 0]

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        # The opponent's randomness comes from the env's seeded generator, so seeded resets repeat.
        seeds = [int(self.np_random.integers(0, 2**31 - 1))]
        try:
            (self.game,) = self.transport.reset(seeds, self.opponent)
        except PeerGone:
            if self.reconnect_timeout_s <= 0:
                raise
            self.transport.reconnect(self.reconnect_timeout_s)
            (self.game,) = self.transport.reset(seeds, self.opponent)
        self._dealt = [0, 0]
        return observe(self.C, self.game), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if not self.action_space.contains(int(action)):
            raise ValueError(f"action {action!r} is not in {self.action_space}")
        if self.game["done"]:
            raise RuntimeError("step() after the round ended: call reset()")
        try:
            (self.game,) = self.transport.step([int(action)])
        except PeerGone:
            if self.reconnect_timeout_s <= 0:
                raise
            # A reloaded page: the round in progress is lost, so it ends truncated; training goes on.
            self.transport.reconnect(self.reconnect_timeout_s)
            return observe(self.C, self.game), 0.0, False, True, {"reconnected": True}
        return self.outcome()

    def outcome(self) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Observation, reward, terminated, truncated and info for the game's current state."""
        reward, info = score(self.C, self.game, self._dealt, self.damage_reward, self.win_reward)
        return observe(self.C, self.game), reward, bool(self.game["done"]), False, info

    def close(self) -> None:
        self.transport.close()

    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array":
            return None
        return draw(self.C, self.game)


def score(
    C: dict[str, Any], g: rules.Game, totals: list[int], damage_reward: float, win_reward: float
) -> tuple[float, dict[str, Any]]:
    """This step's reward and info; `totals` accumulates the round's damage dealt and taken."""
    dealt, taken = g["dealt"]
    totals[0] += dealt
    totals[1] += taken
    reward = damage_reward * (dealt - taken) / C["max_hp"]
    info: dict[str, Any] = {"winner": g["winner"], "frame": g["frame"]}
    if g["done"]:
        reward += win_reward * (1 if g["winner"] == 0 else -1 if g["winner"] == 1 else 0)
        info["episode_stats"] = {
            "win_rate": float(g["winner"] == 0),
            "damage_dealt": float(totals[0]),
            "damage_taken": float(totals[1]),
            "round_length": float(g["frame"]),
        }
    return float(reward), info


def observe(C: dict[str, Any], g: rules.Game) -> np.ndarray:
    me, foe = g["fighters"]
    peak = C["jump_velocity"] * C["jump_velocity"] / (2 * C["gravity"])
    values: list[float] = []
    for f in (me, foe):
        values += [
            f["x"] / C["stage_width"],
            f["y"] / peak,
            f["vx"] / C["walk_speed"],
            f["vy"] / C["jump_velocity"],
            f["hp"] / C["max_hp"],
            float(f["facing"]),
        ]
        values += [1.0 if f["state"] == s else 0.0 for s in range(len(C["states"]))]
        values += [f["cooldown"] / C["attacks"]["special"]["cooldown"], f["timer"] / 30.0]
    values += [(foe["x"] - me["x"]) / C["stage_width"], 1.0 - g["frame"] / C["round_frames"]]
    return np.clip(np.asarray(values, dtype=np.float32), -4.0, 4.0)


RGB = tuple[int, int, int]
SKY: RGB = (24, 28, 44)
FLOOR: RGB = (70, 60, 50)
FIGHTER_COLORS: tuple[RGB, RGB] = ((80, 170, 255), (255, 110, 90))
ATTACK: RGB = (255, 230, 90)
HP: RGB = (90, 220, 110)
HP_LOST: RGB = (120, 40, 40)


def draw(C: dict[str, Any], g: rules.Game, height: int = 200, width: int = 400) -> np.ndarray:
    """A small side view of the twin's state: fighters, reach of active attacks, health bars."""
    img = np.zeros((height, width, 3), dtype=np.uint8)
    img[:] = SKY
    floor = height - 30
    img[floor:] = FLOOR
    scale = width / C["stage_width"]
    for i, f in enumerate(g["fighters"]):
        tall = 60 if f["state"] == S.CROUCH else 90
        if f["state"] == S.KO:
            tall = 20
        x0 = int((f["x"] - C["fighter_width"] / 2) * scale)
        x1 = int((f["x"] + C["fighter_width"] / 2) * scale)
        top = max(0, floor - tall - int(f["y"] * 0.6))
        bottom = max(0, floor - int(f["y"] * 0.6))
        img[top:bottom, max(0, x0) : x1] = FIGHTER_COLORS[i]
        name = rules.attack_of(f["state"])
        if name is not None:
            reach = int(C["attacks"][name]["reach"] * scale)
            xa = int(f["x"] * scale)
            lo, hi = sorted((xa, xa + f["facing"] * reach))
            img[top + 20 : top + 28, max(0, lo) : min(width, hi)] = ATTACK
        bar = int(150 * f["hp"] / C["max_hp"])
        bx = 10 if i == 0 else width - 160
        img[10:20, bx : bx + 150] = HP_LOST
        img[10:20, bx : bx + bar] = HP
    return img
