"""FightingEnv: the fighter game as a gymnasium env (observation, reward, rendering)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from . import rules
from .drawing import draw
from .protocol import FIGHTER_KEYS, GAME_KEYS, pack_game, unpack_game
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
#: The game seeds a round draws from its env's generator ([low, high)): a training round's below
#: 2**31, an evaluation round's (`BestRoundReplay`) from 2**31, so that no evaluation round replays
#: a training round's game, whatever the env seeds (the protocol's seeds go to 2**32 - 1).
TRAINING_GAME_SEEDS, EVALUATION_GAME_SEEDS = (0, 2**31 - 1), (2**31, 2**32)


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
        self.packed = np.array([pack_game(rules.new_game(self.C, 0, opponent))], dtype=np.int64)
        self._totals = np.zeros((1, 2), dtype=np.int64)
        self.observe = Observer(self.C)
        self.game_seeds = TRAINING_GAME_SEEDS

    @property
    def game(self) -> rules.Game:
        """The current game state as a dict (a copy: the env keeps it packed, as it came)."""
        return unpack_game(self.packed[0].tolist(), self.opponent)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        # The opponent's randomness comes from the env's seeded generator, so seeded resets repeat.
        seeds = [int(self.np_random.integers(*self.game_seeds))]
        try:
            self.packed = self.transport.reset(seeds, self.opponent)
        except PeerGone:
            if self.reconnect_timeout_s <= 0:
                raise
            self.transport.reconnect(self.reconnect_timeout_s)
            self.packed = self.transport.reset(seeds, self.opponent)
        self._totals[:] = 0
        return self.observe(self.packed)[0], {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if not self.action_space.contains(int(action)):
            raise ValueError(f"action {action!r} is not in {self.action_space}")
        if self.packed[0, DONE]:
            raise RuntimeError("step() after the round ended: call reset()")
        try:
            self.packed = self.transport.step([int(action)])
        except PeerGone:
            if self.reconnect_timeout_s <= 0:
                raise
            # A reloaded page: the round in progress is lost, so it ends truncated; training goes on.
            self.transport.reconnect(self.reconnect_timeout_s)
            return self.observe(self.packed)[0], 0.0, False, True, {"reconnected": True}
        return self.outcome()

    def outcome(self) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Observation, reward, terminated, truncated and info for the game's current state."""
        rewards, done = score(self.C, self.packed, self._totals, self.damage_reward, self.win_reward)
        info = round_info(self.packed[0], self._totals[0])
        return self.observe(self.packed)[0], float(rewards[0]), bool(done[0]), False, info

    def close(self) -> None:
        self.transport.close()

    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array":
            return None
        return draw(self.C, self.game)


class BestRoundReplay(gym.Wrapper[np.ndarray, np.int64, np.ndarray, np.int64]):
    """An evaluation env that keeps its best round and writes it as a video (the core's
    `BestEpisodeReplay`): it keeps each step's packed state, a few hundred bytes, and draws
    only the best round's, once, when asked for the video. Its rounds draw their game seeds
    apart from training rounds' (`EVALUATION_GAME_SEEDS`)."""

    def __init__(self, env: FightingEnv) -> None:
        super().__init__(env)
        env.game_seeds = EVALUATION_GAME_SEEDS
        self.fighter = env
        self.keeping = False
        self.round: list[np.ndarray] = []
        self.round_return = 0.0
        self.best: tuple[float, list[np.ndarray]] | None = None

    def keep_best_episode(self) -> None:
        """From now on keep the round with the highest return; forget any kept before."""
        self.keeping, self.best = True, None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        self.round, self.round_return = [self.fighter.packed[0].copy()], 0.0
        return obs, info

    def step(self, action: np.int64) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self.keeping:
            self.round.append(self.fighter.packed[0].copy())
            self.round_return += float(reward)
            if (terminated or truncated) and (self.best is None or self.round_return > self.best[0]):
                self.best = (self.round_return, self.round)
        return obs, float(reward), terminated, truncated, info

    def write_best_episode(self, folder: Path, name: str) -> Path | None:
        """The best round kept, drawn as the env renders, as `folder/name.mp4` in real time."""
        if self.best is None:
            return None
        from moviepy.video.io.ImageSequenceClip import ImageSequenceClip

        C, opponent = self.fighter.C, self.fighter.opponent
        frames = [draw(C, unpack_game(row.tolist(), opponent)) for row in self.best[1]]
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{name}.mp4"
        clip = ImageSequenceClip(frames, fps=self.fighter.metadata["render_fps"])  # one frame a step
        clip.write_videofile(str(path), logger=None)
        return path


#: Columns of the packed game state (protocol.pack_game): game keys, damage dealt this step by
#: each fighter, then each fighter's FIGHTER_KEYS.
FRAME, DONE, WINNER = (GAME_KEYS.index(k) for k in ("frame", "done", "winner"))
DEALT = len(GAME_KEYS)
FIGHTER = tuple(DEALT + 2 + j * len(FIGHTER_KEYS) for j in range(2))
X, FACING, STATE, TIMER, COOLDOWN = (
    FIGHTER_KEYS.index(k) for k in ("x", "facing", "state", "timer", "cooldown")
)


def score(
    C: dict[str, Any], packed: np.ndarray, totals: np.ndarray, damage_reward: float, win_reward: float
) -> tuple[np.ndarray, np.ndarray]:
    """Each arena's reward for this step, and whether its round ended; `totals` (n, 2) accumulates
    the round's damage dealt and taken."""
    dealt = packed[:, DEALT : DEALT + 2]
    totals += dealt
    rewards = damage_reward * (dealt[:, 0] - dealt[:, 1]) / C["max_hp"]
    done = packed[:, DONE] != 0
    if done.any():
        winner = packed[:, WINNER]
        bonus = np.where(winner == 0, 1.0, np.where(winner == 1, -1.0, 0.0))
        rewards += np.where(done, win_reward * bonus, 0.0)
    return rewards, done


#: The stats a round reports as it ends.
EPISODE_STATS = ("win_rate", "damage_dealt", "damage_taken", "round_length")


def round_info(row: np.ndarray, totals: np.ndarray) -> dict[str, Any]:
    """A step's info for one arena; with `episode_stats` once its round has ended."""
    info: dict[str, Any] = {"winner": int(row[WINNER]), "frame": int(row[FRAME])}
    if row[DONE]:
        info["episode_stats"] = {
            "win_rate": float(row[WINNER] == 0),
            "damage_dealt": float(totals[0]),
            "damage_taken": float(totals[1]),
            "round_length": float(row[FRAME]),
        }
    return info


class Observer:
    """Observations (n, len(OBSERVATION_FIELDS)) of n packed game states (n, GAME_WIRE_LENGTH).

    One gather and scale for the plain fields, one comparison for the state one-hots: a handful
    of array operations whatever the number of arenas.
    """

    def __init__(self, C: dict[str, Any]) -> None:
        n_states = len(C["states"])
        peak = C["jump_velocity"] * C["jump_velocity"] / (2 * C["gravity"])
        plain = {"x": C["stage_width"], "y": peak, "vx": C["walk_speed"], "vy": C["jump_velocity"],
                 "hp": C["max_hp"], "facing": 1, "cooldown": C["attacks"]["special"]["cooldown"],
                 "timer": 30.0}  # fmt: skip
        columns, scales, onehot_slots, state_columns = [], [], [], []
        for slot, name in enumerate(OBSERVATION_FIELDS[:-2]):
            base = FIGHTER[0] if name.startswith("self_") else FIGHTER[1]
            field = name.split("_", 1)[1]
            if field.startswith("state_"):
                onehot_slots.append(slot)
                state_columns.append(base + STATE)
                field = "x"  # a placeholder: the comparison below overwrites it
            columns.append(base + FIGHTER_KEYS.index(field))
            scales.append(plain[field])
        self.columns = np.array([*columns, FRAME, FRAME])  # distance and time left: set below
        self.scales = np.array([*scales, 1.0, 1.0])
        self.onehot_slots = np.array(onehot_slots)
        self.state_columns = np.array(state_columns)
        self.state_values = np.tile(np.arange(n_states), 2)
        self.width, self.frames = C["stage_width"], C["round_frames"]

    def __call__(self, packed: np.ndarray) -> np.ndarray:
        out = packed[:, self.columns] / self.scales
        out[:, self.onehot_slots] = packed[:, self.state_columns] == self.state_values
        out[:, -2] = (packed[:, FIGHTER[1] + X] - packed[:, FIGHTER[0] + X]) / self.width
        out[:, -1] = 1.0 - packed[:, FRAME] / self.frames
        return np.clip(out, -4.0, 4.0, out=out).astype(np.float32)
