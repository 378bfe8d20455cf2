"""Config schemas of the replay buffer plugins: every key, its default and its description."""

from dataclasses import dataclass


@dataclass
class ReplayBufferConfig:
    capacity: int = 1_000_000
    """Most transitions held; once full, each insert overwrites the oldest."""


@dataclass
class MemoryEfficientReplayBufferConfig:
    capacity: int = 1_000_000
    """Most transitions held (fewer when frames of very short episodes crowd them out)."""
    frame_history_len: int = 4
    """k: frames per stacked observation, rebuilt from the framebuffer when sampling."""
