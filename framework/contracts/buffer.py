"""Replay buffers: transitions in, batches of arrays out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np


@runtime_checkable
class Buffer(Protocol):
    """A replay buffer: `insert` takes one transition by field name, `sample` a dict of batch arrays."""

    Config: ClassVar[type]
    capacity: int
    """Most transitions held."""

    def __init__(self, cfg: Any) -> None: ...
    def seed(self, seed: int) -> None: ...
    def insert(self, /, **transition: Any) -> None: ...
    def sample(self, batch_size: int) -> dict[str, np.ndarray]: ...
    def __len__(self) -> int: ...
    def state_dict(self) -> dict[str, Any]: ...
    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...


@runtime_checkable
class FrameBuffer(Buffer, Protocol):
    """A buffer that stores each frame once and stacks `frame_history_len` of them itself: an episode
    starts with `on_reset(frame)`, then `insert(action=, reward=, next_frame=, done=)` per step."""

    frame_history_len: int

    def on_reset(self, frame: np.ndarray) -> None: ...
