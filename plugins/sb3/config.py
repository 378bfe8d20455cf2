"""The SB3 agent plugin's config schema: every key, its default and its description (`agent.<key>`)."""

# Optional[...] and Dict[...] in schemas: OmegaConf 2.3 cannot read PEP 604 unions.
from dataclasses import dataclass, field
from typing import Any, Dict, Optional

from framework.values import bounds

VEC_ENVS = ("dummy", "subproc")


@dataclass
class SB3Config:
    algo: str = "PPO"
    """Algorithm class: PPO, A2C, DQN, SAC, TD3, DDPG, or an sb3-contrib one (QRDQN, TQC, TRPO, ...)."""
    policy: str = "auto"
    """Policy: auto (CnnPolicy for images, MultiInputPolicy for dicts, else MlpPolicy) or a name."""
    hyperparams: Dict[str, Any] = field(default_factory=dict)
    """Constructor arguments of the algorithm; `lin_<x>` means a linear schedule from x to 0."""
    policy_kwargs: Dict[str, Any] = field(default_factory=dict)
    """Policy arguments (net_arch, activation_fn by name, ...)."""
    vec_env: str = "dummy"
    """How env.n_envs instances run: dummy (one process) or subproc (one process each)."""
    log_interval: Optional[int] = field(default=None, metadata=bounds(ge=1))
    """SB3 log interval (rollouts for on-policy, episodes for off-policy); None: SB3's default."""
    save_replay_buffer: bool = False
    """Include the replay buffer of off-policy algorithms in checkpoints."""
