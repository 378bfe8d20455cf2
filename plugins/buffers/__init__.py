"""Replay buffers: a circular ReplayBuffer and a MemoryEfficientReplayBuffer that stores each frame once."""
