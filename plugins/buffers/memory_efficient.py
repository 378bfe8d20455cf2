"""MemoryEfficientReplayBuffer: each frame stored once; frame stacks rebuilt from indices when sampled.

Frames go into a circular framebuffer in the order they arrive, so a trajectory's frames are
consecutive there (on_reset writes its first frame, each insert its next frame). Frames are
numbered in order of writing; frame n lives in slot n % frame_capacity. A transition keeps the
number `f` of its observation's newest frame and `first = max(f - k + 1, trajectory start)`,
the oldest frame its stacks show. With c_i = max(f + 1 - k + i, first) for i = 0 … k, its
observation is c_0 … c_{k-1} and its next observation c_1 … c_k: at an episode start the stacks
repeat the trajectory's first frame, as gymnasium's `FrameStackObservation(env, k)`
(padding_type="reset") does. Sampling gathers the k + 1 frames once for both stacks.

The framebuffer holds capacity + k + FRAME_MARGIN frames. Each trajectory writes one frame more
than it has transitions (its first), so with short episodes frames can be overwritten while
transitions that need them are still among the newest `capacity`. Those are dropped, oldest
first: a transition is stored iff it is among the newest `capacity` inserted and every frame
from `first` to `f + 1` is still in the framebuffer. With episodes of L steps that keeps about
capacity × L / (L + 1) transitions, at about one frame of memory each.
"""

from __future__ import annotations

from collections.abc import Mapping

# Optional[...] in schemas: OmegaConf 2.3 cannot read PEP 604 unions.
from typing import TYPE_CHECKING, Any, ClassVar, Optional

import numpy as np

from .config import MemoryEfficientReplayBufferConfig
from .storage import (
    Columns,
    check_batch_size,
    check_matches,
    check_positions,
    positive,
    rng_from_state,
    rng_state,
    state_int,
    transition_values,
)

#: Framebuffer slots beyond capacity + k; each lets one more trajectory start before any is dropped.
FRAME_MARGIN = 2

#: Per-transition columns: output key → the insert() argument it comes from.
TRANSITION_FIELDS = {"actions": "action", "rewards": "reward", "dones": "done"}
INSERT_FIELDS = ("action", "reward", "next_frame", "done")
COUNTERS = ("written", "count", "start", "latest", "trajectory_start")
OWNER = "MemoryEfficientReplayBuffer"


class MemoryEfficientReplayBuffer:
    """Replay of frame-stacked observations that stores each frame once: on_reset(frame), then insert()."""

    Config: ClassVar[type] = MemoryEfficientReplayBufferConfig

    def __init__(
        self,
        cfg: Optional[MemoryEfficientReplayBufferConfig] = None,
        *,
        capacity: Optional[int] = None,
        frame_history_len: Optional[int] = None,
        seed: Optional[int] = None,
    ) -> None:
        cfg = cfg if cfg is not None else MemoryEfficientReplayBufferConfig()
        self.capacity = positive("buffer.capacity", cfg.capacity if capacity is None else capacity)
        k = cfg.frame_history_len if frame_history_len is None else frame_history_len
        self.frame_history_len = positive("buffer.frame_history_len", k)
        #: Frames the framebuffer holds.
        self.frame_capacity = self.capacity + self.frame_history_len + FRAME_MARGIN
        self._frames = Columns(OWNER, {"frames": "frame"}, self.frame_capacity)
        self._framebuffer = np.empty(0)  # the frames column, once the first on_reset has allocated it
        self._transitions = Columns(OWNER, TRANSITION_FIELDS, self.capacity)
        # Per transition: the frame numbers f and first (see the module docstring).
        self._newest_frames = np.zeros(self.capacity, dtype=np.int64)
        self._first_frames = np.zeros(self.capacity, dtype=np.int64)
        # c_i = max(f + 1 - back_i, first) with back = k, k-1, ..., 0.
        self._back = np.arange(self.frame_history_len, -1, -1, dtype=np.int64)
        self._batch: Optional[tuple[np.ndarray, dict[str, np.ndarray]]] = None
        self._rng = np.random.default_rng(seed)
        self._written = 0  # frames written so far
        self._count = 0  # transitions inserted so far; transition n lives in slot n % capacity
        self._start = 0  # the oldest stored transition
        self._latest = -1  # the current trajectory's newest frame (-1: no trajectory yet)
        self._trajectory_start = 0  # the current trajectory's first frame
        self._accepting = False  # a trajectory is under way and has not terminated

    def seed(self, seed: int) -> None:
        """Reseed the sampling generator."""
        self._rng = np.random.default_rng(seed)

    def on_reset(self, frame: np.ndarray) -> None:
        """Start a trajectory from its first frame; the previous one (terminated or truncated) ends here."""
        self._frames.write(self._written % self.frame_capacity, (frame,))
        self._framebuffer = self._frames.arrays["frames"]
        self._latest = self._trajectory_start = self._written
        self._written += 1
        self._accepting = True
        self._evict()

    def insert(self, /, **transition: Any) -> None:
        """One step of the current trajectory: action, reward, next_frame (its newest frame), done
        (= terminated)."""
        action, reward, next_frame, done = transition_values(OWNER, transition, INSERT_FIELDS)
        if not self._accepting:
            self._refuse_insert()
        # Every value is checked before anything is written, so a bad one leaves the buffer as it was.
        framebuffer = self._framebuffer
        if (
            type(next_frame) is not np.ndarray
            or next_frame.shape != framebuffer.shape[1:]
            or next_frame.dtype != framebuffer.dtype
        ):
            self._frames.check((next_frame,))
        count, written, newest = self._count, self._written, self._latest
        slot = count % self.capacity
        self._transitions.write(slot, (action, reward, done))
        self._newest_frames[slot] = newest
        self._first_frames[slot] = max(newest - self.frame_history_len + 1, self._trajectory_start)
        framebuffer[written % self.frame_capacity] = next_frame
        self._latest, self._written = written, written + 1
        self._count = count + 1
        self._accepting = not done
        self._evict()

    def _refuse_insert(self) -> None:
        if self._latest < 0:
            raise RuntimeError(f"{OWNER}.insert before on_reset: call on_reset(first_frame) first")
        raise RuntimeError(
            f"{OWNER}.insert after a transition with done=True: call on_reset(frame) to start "
            "the next episode first"
        )

    def _evict(self) -> None:
        """Move the start past transitions that were overwritten or whose frames were."""
        count = self._count
        start = max(self._start, count - self.capacity)
        overwritten_below = self._written - self.frame_capacity  # frame numbers below it are gone
        if overwritten_below > 0:
            firsts = self._first_frames
            while start < count and firsts[start % self.capacity] < overwritten_below:
                start += 1
        self._start = start

    def __len__(self) -> int:
        return self._count - self._start

    @property
    def nbytes(self) -> int:
        """Bytes held by the framebuffer and the per-transition arrays."""
        frame_numbers = self._newest_frames.nbytes + self._first_frames.nbytes
        return self._frames.nbytes + self._transitions.nbytes + frame_numbers

    def sample(self, batch_size: int) -> dict[str, np.ndarray]:
        """A batch drawn uniformly (with replacement); the arrays are reused by the next sample().

        observations and next_observations are overlapping views of one (B, k + 1, *frame) array.
        """
        batch_size = check_batch_size(OWNER, batch_size, len(self))
        return self._gather(self._rng.integers(0, len(self), size=batch_size))

    def gather(self, positions: np.ndarray) -> dict[str, np.ndarray]:
        """Transitions at `positions`, 0 being the oldest stored and len-1 the newest."""
        return self._gather(check_positions(OWNER, positions, len(self)))

    def frame_numbers(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Numbers (in order of writing, from 0) of the frames stacked in the observation and the next
        observation of the transitions at `positions`, each shaped (len(positions), k)."""
        positions = check_positions(OWNER, positions, len(self))
        frames = self._stack_frames((positions + self._start) % self.capacity)
        return frames[:, :-1], frames[:, 1:]

    def _stack_frames(self, slots: np.ndarray) -> np.ndarray:
        """c_0 … c_k of each transition (module docstring), shaped (len(slots), k + 1)."""
        newest = self._newest_frames[slots][:, None]
        return np.maximum(newest + 1 - self._back, self._first_frames[slots][:, None])

    def _gather(self, positions: np.ndarray) -> dict[str, np.ndarray]:
        slots = (positions + self._start) % self.capacity
        stacks, out = self._batch_arrays(len(slots))
        self._frames.take("frames", self._stack_frames(slots) % self.frame_capacity, stacks)
        for key in TRANSITION_FIELDS:
            self._transitions.take(key, slots, out[key])
        return out

    def _batch_arrays(self, n: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Output arrays for n transitions, allocated once per batch size."""
        if self._batch is None or len(self._batch[0]) != n:
            stacks = self._frames.empty_like("frames", (n, self.frame_history_len + 1))
            out = {key: self._transitions.empty_like(key, (n,)) for key in TRANSITION_FIELDS}
            self._batch = stacks, {"observations": stacks[:, :-1], "next_observations": stacks[:, 1:], **out}
        return self._batch

    def state_dict(self) -> dict[str, Any]:
        """Counters, the sampling generator, the frames and the transitions (views: save them at once)."""
        stored = min(self._count, self.capacity)
        return {
            "capacity": self.capacity,
            "frame_history_len": self.frame_history_len,
            "written": self._written,
            "count": self._count,
            "start": self._start,
            "latest": self._latest,
            "trajectory_start": self._trajectory_start,
            "accepting": self._accepting,
            "rng": rng_state(self._rng),
            **self._frames.state(min(self._written, self.frame_capacity)),
            **self._transitions.state(stored),
            "newest_frames": self._newest_frames[:stored],
            "first_frames": self._first_frames[:stored],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what state_dict() returned (also after np.savez / np.load)."""
        check_matches(OWNER, state, capacity=self.capacity, frame_history_len=self.frame_history_len)
        counters = {key: state_int(OWNER, state, key) for key in COUNTERS}
        written, count, start, latest, trajectory_start = (counters[key] for key in COUNTERS)
        if not (0 <= start <= count <= written and count - start <= self.capacity and latest < written):
            raise ValueError(f"{OWNER}.load_state_dict: the counters do not fit together: {counters}")
        stored = min(count, self.capacity)
        self._frames.load(state, min(written, self.frame_capacity))
        self._transitions.load(state, stored)
        self._framebuffer = self._frames.arrays.get("frames", np.empty(0))
        self._newest_frames[:stored] = np.asarray(state["newest_frames"])
        self._first_frames[:stored] = np.asarray(state["first_frames"])
        self._batch = None
        self._written, self._count, self._start = written, count, start
        self._latest, self._trajectory_start = latest, trajectory_start
        self._accepting = bool(state["accepting"])
        self._rng = rng_from_state(state["rng"])


if TYPE_CHECKING:  # mypy holds each plugin to its kind's contract
    from framework.contracts import FrameBuffer

    _memoryefficientreplaybuffer_contract: type[FrameBuffer] = MemoryEfficientReplayBuffer
