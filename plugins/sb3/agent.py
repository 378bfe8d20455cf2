"""The SB3 adapter: one agent plugin that runs any Stable-Baselines3 algorithm."""

# Optional[...] and Dict[...] in schemas: OmegaConf 2.3 cannot read PEP 604 unions.
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Optional

from framework.context import RunContext

from .algorithms import algorithm_class, build_kwargs, default_policy
from .bridge import FrameworkCallback, tracker_logger
from .vec_env import make_vec_env

MODEL_FILE = "model.zip"
REPLAY_FILE = "replay_buffer.pkl"


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
    log_interval: Optional[int] = None
    """SB3 log interval (rollouts for on-policy, episodes for off-policy); None: SB3's default."""
    save_replay_buffer: bool = False
    """Include the replay buffer of off-policy algorithms in checkpoints."""


class SB3Agent:
    """Any Stable-Baselines3 algorithm, with tuned hyperparameters per env from conf/tuned."""

    Config = SB3Config

    def __init__(self, cfg: SB3Config) -> None:
        self.cfg = cfg
        self.algo_cls = algorithm_class(cfg.algo)
        if cfg.vec_env not in ("dummy", "subproc"):
            raise ValueError(f"agent.vec_env={cfg.vec_env!r} is not valid; choose dummy or subproc")
        self.model: Any = None
        self._load_from: Optional[Path] = None

    def learn(self, ctx: RunContext) -> None:
        venv = make_vec_env(ctx.env_plugin, ctx.n_envs, seed=ctx.seed, kind=self.cfg.vec_env)
        fresh = self._load_from is None
        if fresh:
            policy = self.cfg.policy if self.cfg.policy != "auto" else default_policy(venv.observation_space)
            try:
                self.model = self.algo_cls(
                    policy,
                    venv,
                    seed=ctx.seed,
                    device=ctx.device,
                    verbose=0,
                    **build_kwargs(self.cfg.hyperparams, self.cfg.policy_kwargs, venv.action_space),
                )
            except AssertionError as e:  # SB3 checks spaces with asserts
                raise ValueError(f"agent.algo={self.cfg.algo} cannot train on this env: {e}") from None
        else:
            self._restore(venv, ctx.device)
        self.model.set_random_seed(ctx.seed)
        self.model.set_logger(tracker_logger(ctx.tracker))
        remaining = ctx.total_steps - int(self.model.num_timesteps)
        kwargs = {} if self.cfg.log_interval is None else {"log_interval": self.cfg.log_interval}
        try:
            if remaining > 0:
                self.model.learn(
                    total_timesteps=remaining,
                    callback=FrameworkCallback(ctx, self),
                    reset_num_timesteps=fresh,
                    **kwargs,
                )
        finally:
            venv.close()

    def act(self, obs: Any, *, deterministic: bool = True) -> Any:
        if self.model is None:
            self._restore(None, "auto")
        action, _ = self.model.predict(obs, deterministic=deterministic)
        return action

    def save(self, path: Path) -> None:
        self.model.save(path / MODEL_FILE)
        if self.cfg.save_replay_buffer and hasattr(self.model, "replay_buffer"):
            self.model.save_replay_buffer(path / REPLAY_FILE)

    def load(self, path: Path) -> None:
        if not (path / MODEL_FILE).is_file():
            raise FileNotFoundError(f"No SB3 model at {path / MODEL_FILE}")
        self._load_from = path

    def _restore(self, venv: Any, device: str) -> None:
        assert self._load_from is not None, "act() before learn() or load()"
        self.model = self.algo_cls.load(self._load_from / MODEL_FILE, env=venv, device=device)
        if (self._load_from / REPLAY_FILE).is_file() and hasattr(self.model, "load_replay_buffer"):
            self.model.load_replay_buffer(self._load_from / REPLAY_FILE)
