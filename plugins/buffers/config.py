"""Config schemas of the replay buffer plugins: every key, its default and its description."""

from dataclasses import dataclass, field

from framework.values import bounds


@dataclass
class ReplayBufferConfig:
    capacity: int = field(default=1_000_000, metadata=bounds(ge=1))
    """Most transitions held; once full, each insert overwrites the oldest."""


@dataclass
class MemoryEfficientReplayBufferConfig:
    capacity: int = field(default=1_000_000, metadata=bounds(ge=1))
    """Most transitions held (fewer when frames of very short episodes crowd them out)."""
    frame_history_len: int = field(default=4, metadata=bounds(ge=1))
    """k: frames per stacked observation, rebuilt from the framebuffer when sampling."""
