"""Our DQN's config schema: every key, its default and its description (`agent.<key>`)."""

# Optional[...] and List[...] in schemas: OmegaConf 2.3 cannot read PEP 604 unions.
from dataclasses import dataclass, field
from typing import Any, List, Optional

from framework.values import bounds


@dataclass
class DQNConfig:
    network: str = "auto"
    """Q network: auto (the Nature CNN for uint8 frames, else an MLP), mlp or cnn."""
    hidden_sizes: List[int] = field(default_factory=lambda: [64, 64], metadata=bounds(ge=1))
    """Hidden layer widths of the MLP."""
    activation: str = "relu"
    """Activation: relu, tanh, elu, gelu, silu or leaky_relu."""
    dueling: bool = False
    """Dueling head: Q(s, a) = V(s) + A(s, a) − mean_a A(s, a), both from the last hidden layer."""
    learning_rate: Any = field(default=1.0e-4, metadata=bounds(gt=0))
    """Adam's learning rate: a number, or a schedule over env steps (the forms of exploration)."""
    adam_eps: float = field(default=1.0e-8, metadata=bounds(gt=0))
    """Adam's epsilon."""
    exploration: Any = field(
        default_factory=lambda: {"kind": "linear", "start": 1.0, "end": 0.05, "fraction": 0.1},
        metadata=bounds(ge=0, le=1),
    )
    """ε of ε-greedy acting: a number, or a schedule over env steps.

    {kind: constant, value: V}; {kind: linear, start: A, end: B, steps: N} (or fraction: F of
    total_steps, then flat at B); {kind: piecewise, endpoints: [[step, value], ...], outside_value: V}.
    A fraction stretches with total_steps (raised on resume, say); steps stay where they are. To
    switch kinds on the command line: ~agent.exploration '+agent.exploration={kind: constant, value: 0.1}'.
    """
    buffer_size: int = field(default=1_000_000, metadata=bounds(ge=1))
    """Replay capacity when the run selects no buffer (~buffer); with one, this follows buffer.capacity."""
    batch_size: int = field(default=32, metadata=bounds(ge=1))
    """Transitions per gradient step."""
    gamma: float = field(default=0.99, metadata=bounds(ge=0, le=1))
    """Discount factor."""
    n_step: int = field(default=1, metadata=bounds(ge=1))
    """Transitions over n env steps (n-step returns); the target bootstraps with gamma^n."""
    learning_starts: int = field(default=1000, metadata=bounds(ge=0))
    """Env steps of uniformly random actions first; training waits for this many stored transitions."""
    train_freq: int = field(default=4, metadata=bounds(ge=1))
    """A train phase every N env steps."""
    gradient_steps: int = field(default=1, metadata=bounds(ge=1, also=(-1,)))
    """Gradient steps per train phase (-1: as many as env steps since the last phase)."""
    target_update_interval: int = field(default=1000, metadata=bounds(ge=1))
    """Update the target network every N env steps."""
    tau: float = field(default=1.0, metadata=bounds(gt=0, le=1))
    """Each target update: target ← τ·online + (1 − τ)·target (1: a hard copy; < 1: Polyak averaging)."""
    double_q: bool = True
    """Double Q-learning: the online network picks the next action, the target network values it."""
    loss: str = "huber"
    """TD loss: huber (smooth L1) or mse."""
    max_grad_norm: Optional[float] = field(default=10.0, metadata=bounds(gt=0))
    """Clip the gradient's global norm to this (None: no clipping)."""
    flush_denormal: bool = True
    """Train with CPU denormal floats flushed to zero (torch.set_flush_denormal) while learn() runs.

    The Adam moments of units whose gradient stays zero (dead ReLUs) decay below 1e-38, where x86
    CPUs compute about ten times slower; flushing them to zero changes nothing measurable.
    """
    log_every_steps: int = field(default=1000, metadata=bounds(ge=1))
    """Log train/* and rollout/* every N env steps (means since the last log)."""
    save_buffer: bool = False
    """Include the replay buffer in checkpoints (np.savez; GBs for Atari), so that resume= skips the
    learning_starts warm-up."""
