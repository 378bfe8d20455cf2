"""Learning: the network, its optimizer and the replay of self-play positions; training phases."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from framework.errors import ConfigError

from .config import AlphaZeroConfig
from .network import PolicyValueNet
from .replay import PositionReplay
from .selfplay import GameRecord

WEIGHTS_FILE = "alphazero.pt"
REPLAY_FILE = "replay.npz"


class Learner:
    """The trained network (`net`), the best so far (`best`: `net` without gating), Adam, the replay."""

    def __init__(self, cfg: AlphaZeroConfig) -> None:
        self.cfg = cfg
        self.net: PolicyValueNet | None = None
        self.best: PolicyValueNet | None = None
        self.optimizer: torch.optim.Optimizer | None = None
        self.replay: PositionReplay | None = None
        self.device = torch.device("cpu")
        self.stats: dict[str, list[float]] = {}
        self._restored: dict[str, Any] | None = None
        self._restored_replay: Path | None = None

    def setup(self, game: Any, device: str) -> None:
        """Networks for the game (new ones, or the loaded ones checked against it), Adam, the replay."""
        cfg = self.cfg
        self.device = torch.device(device)
        network: dict[str, Any] = {
            "board_size": game.board_shape[0],
            "in_planes": game.n_planes,
            "blocks": cfg.blocks,
            "channels": cfg.channels,
        }
        if cfg.value_head != "scalar":
            network["value_head"] = cfg.value_head
        if self.net is not None and self.net.spec != network:
            raise ConfigError(f"the checkpoint's network is {self.net.spec}, and agent.* asks for {network}")
        if self.net is None:
            self.net = PolicyValueNet(**network)
        self.net.to(self.device).eval()
        if self.best is None or not cfg.gating:
            self.best = self.net if not cfg.gating else copy.deepcopy(self.net)
        self.best.to(self.device).eval()
        # The rate of each phase is train_phase's (agent.learning_rate may be a schedule).
        self.optimizer = torch.optim.Adam(self.net.parameters(), weight_decay=cfg.l2)
        if self._restored is not None:
            if self._restored.get("optimizer"):
                self.optimizer.load_state_dict(self._restored["optimizer"])
            if "torch_rng" in self._restored:  # a shipped agent holds its network only
                torch.set_rng_state(self._restored["torch_rng"])
            self._restored = None
        self.replay = PositionReplay(
            cfg.replay_size, (game.n_planes, *game.board_shape), game.n_actions, game.symmetry_index
        )
        if self._restored_replay is not None:
            with np.load(self._restored_replay, allow_pickle=False) as saved:
                self.replay.load_state_dict({key: saved[key] for key in saved.files})
            self._restored_replay = None

    def ready(self) -> bool:
        """Enough positions for a training phase."""
        return self.replay is not None and len(self.replay) >= max(self.cfg.min_replay, self.cfg.batch_size)

    def add_game(self, record: GameRecord, *, lag: int = 0) -> None:
        """A finished game into the replay; `lag`: how many versions behind the weights it began with are."""
        assert self.replay is not None
        if len(record):  # under playout cap randomisation a short game may have no full search
            self.replay.add(np.stack(record.planes), np.stack(record.policies), record.outcomes())
        for key, value in (
            ("selfplay/game_length", record.moves),
            ("selfplay/recorded_share", len(record) / max(record.moves, 1)),
            ("selfplay/black_win_rate", float(record.winner == 1)),
            ("selfplay/draw_rate", float(record.winner == 0)),
            ("selfplay/weights_lag", float(lag)),
        ):
            self.stats.setdefault(key, []).append(value)

    def train_phase(self, rng: np.random.Generator, learning_rate: float) -> None:
        """`updates_per_phase` gradient steps on batches of the replay: cross-entropy to π, and MSE to
        z (a scalar value head) or cross-entropy to z's class (win, draw, loss: a `wdl` head)."""
        cfg, net, optimizer, replay = self.cfg, self.net, self.optimizer, self.replay
        assert net is not None and optimizer is not None and replay is not None
        for group in optimizer.param_groups:
            group["lr"] = learning_rate
        net.train()
        losses: list[torch.Tensor] = []  # read once the phase is over: on a GPU a read waits for it
        for _ in range(cfg.updates_per_phase):
            planes, policy, value = replay.sample(cfg.batch_size, rng)
            x = torch.from_numpy(planes).to(self.device)
            pi = torch.from_numpy(policy).to(self.device)
            z = torch.from_numpy(value).to(self.device)
            logits, out = net.heads(x)
            log_p = F.log_softmax(logits, dim=1)
            policy_loss = -(pi * log_p).sum(1).mean()
            if net.wdl:  # z is 1, 0 or -1: classes 0 (win), 1 (draw), 2 (loss)
                value_loss = F.cross_entropy(out, (1 - z.round()).long())
            else:
                value_loss = F.mse_loss(torch.tanh(out).squeeze(1), z)
            loss = policy_loss + value_loss
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            with torch.no_grad():
                entropy = -(log_p.exp() * log_p).sum(1).mean()
                losses.append(torch.stack([policy_loss.detach(), value_loss.detach(), entropy]))
        net.eval()
        if losses:
            read = torch.stack(losses).cpu().numpy()
            for i, key in enumerate(("train/policy_loss", "train/value_loss", "train/policy_entropy")):
                self.stats.setdefault(key, []).extend(float(v) for v in read[:, i])

    def take_stats(self) -> dict[str, float]:
        metrics = {key: float(np.mean(values)) for key, values in self.stats.items() if values}
        self.stats = {}
        return metrics

    def weights(self, which: str = "best") -> dict[str, np.ndarray]:
        """A network's weights as arrays (what the inference service is given)."""
        net = self.best if which == "best" else self.net
        assert net is not None
        return {key: t.detach().cpu().numpy() for key, t in net.state_dict().items()}

    def accept(self) -> None:
        """The trained network becomes the best (a gate it passed)."""
        assert self.net is not None and self.best is not None
        self.best.load_state_dict(self.net.state_dict())

    def save(self, path: Path) -> dict[str, Any]:
        """Weights, Adam and the torch RNG to `path` (and the replay); the network's spec back."""
        assert self.net is not None and self.best is not None
        weights = {
            "net": self.net.state_dict(),
            "best": self.best.state_dict(),
            "optimizer": self.optimizer.state_dict() if self.optimizer else None,
            "torch_rng": torch.get_rng_state(),
        }
        torch.save(weights, path / WEIGHTS_FILE)
        if self.cfg.save_replay and self.replay is not None:
            np.savez(path / REPLAY_FILE, **self.replay.state_dict())
        return dict(self.net.spec)

    def load(self, path: Path, spec: dict[str, Any]) -> None:
        weights = torch.load(path / WEIGHTS_FILE, map_location="cpu", weights_only=True)
        self.net = PolicyValueNet(**spec)
        self.net.load_state_dict(weights.get("net", weights["best"]))  # shipped: the best one only
        self.best = self.net if not self.cfg.gating else copy.deepcopy(self.net)
        self.best.load_state_dict(weights["best"])
        self.net.eval()
        self.best.eval()
        self._restored = weights
        self._restored_replay = path / REPLAY_FILE if (path / REPLAY_FILE).is_file() else None
