"""A tabular Q-learning agent: the framework's agent contract kept by a plugin of its own."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from framework.errors import ConfigError

from .config import QTableConfig

#: Its package's logger: the framework shows an installed plugin's INFO lines as its own.
log = logging.getLogger(__name__)

TABLE_FILE = "qtable.json"


class QTable:
    """Tabular Q-learning over rounded observations, ε-greedy (example third-party agent)."""

    Config: ClassVar[type] = QTableConfig

    def __init__(self, cfg: QTableConfig) -> None:
        # `cfg` is the agent section of the run's config, typed by QTableConfig: attribute access,
        # bounds already checked (framework.values.bounds); a check of its own is a ConfigError.
        if cfg.epsilon_end > cfg.epsilon:
            raise ConfigError(
                f"agent.epsilon_end={cfg.epsilon_end} must not exceed agent.epsilon={cfg.epsilon}"
            )
        self.cfg = cfg
        self.q: dict[str, list[float]] = {}
        self.step = 0  # the run's total, restored by load() on a resume

    def learn(self, ctx: Any) -> None:
        """Train from ctx.start_step (0, or a resumed run's step) to ctx.total_steps, calling
        ctx.after_step(step, self) after every env step: progress, evaluation, checkpoints, Ctrl-C."""
        env = ctx.make_env(0)  # a training env, seeded by the run (its evaluation env is the core's)
        # A resumed part seeds past the steps done, so it does not replay its first part's episodes.
        rng = np.random.default_rng(ctx.seed + ctx.start_step)
        obs, _ = env.reset(seed=ctx.seed + ctx.start_step)
        self.step = ctx.start_step
        log.info("qtable learns from step %d with %d states known", self.step, len(self.q))
        try:
            while self.step < ctx.total_steps:
                explore = rng.random() < self._epsilon(ctx.total_steps)
                action = int(rng.integers(env.action_space.n)) if explore else self.act(obs)
                after, reward, terminated, truncated, _ = env.step(action)
                target = reward + (0.0 if terminated else self.cfg.gamma * max(self._row(after, env)))
                row = self._row(obs, env)
                row[action] += self.cfg.lr * (target - row[action])
                obs = env.reset()[0] if terminated or truncated else after
                self.step += 1
                if self.step % 100 == 0:
                    ctx.log_metrics({"train/states": len(self.q)}, self.step)
                if not ctx.after_step(self.step, self):  # False: the run is stopping (Ctrl-C, SIGTERM)
                    return
        finally:
            env.close()

    def act(self, obs: Any, *, deterministic: bool = True) -> int:
        """The greedy action for one (unbatched) observation; an unseen state's is action 0."""
        row = self.q.get(self._key(obs))
        return int(np.argmax(row)) if row else 0

    def save(self, path: Path) -> None:
        """Write the table into `path`, an empty folder the core renames once everything is written."""
        (path / TABLE_FILE).write_text(json.dumps({"step": self.step, "q": self.q}))

    def load(self, path: Path) -> None:
        """Read what save() wrote; called before learn() when a run is resumed."""
        saved = json.loads((path / TABLE_FILE).read_text())
        self.step, self.q = int(saved["step"]), saved["q"]

    def _epsilon(self, total_steps: int) -> float:
        done = min(1.0, self.step / max(1, total_steps))
        return self.cfg.epsilon + done * (self.cfg.epsilon_end - self.cfg.epsilon)

    def _key(self, obs: Any) -> str:
        return json.dumps(np.round(np.asarray(obs, dtype=float), self.cfg.decimals).tolist())

    def _row(self, obs: Any, env: Any) -> list[float]:
        return self.q.setdefault(self._key(obs), [0.0] * int(env.action_space.n))
