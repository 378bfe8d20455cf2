"""Learning: the network, its optimizer and the replay of self-play positions; training phases."""

from __future__ import annotations

import copy
import threading
from pathlib import Path
from typing import Any

import numpy as np
import torch

from framework.errors import ConfigError

from .config import AlphaZeroConfig
from .device_training import DeviceReplay, DeviceUpdates, losses
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
        self.lock = threading.RLock()
        """Held while the networks, Adam or the counters change or are read whole (a phase, a
        gate's verdict, a checkpoint): training may run in a thread beside self-play."""
        self._replay_lock = threading.Lock()
        self.on_device = False
        """Training from a copy of the replay on the device, in CUDA graphs: on a GPU (setup)."""
        self._device: DeviceUpdates | None = None
        self._stats_lock = threading.Lock()
        self._expected_game: Any = None

    def network_spec(self, game: Any) -> dict[str, Any]:
        """The network agent.* asks for on `game` (a loaded one must be it)."""
        network: dict[str, Any] = {
            "board_size": game.board_shape[0],
            "in_planes": game.n_planes,
            "blocks": self.cfg.blocks,
            "channels": self.cfg.channels,
        }
        if self.cfg.value_head != "scalar":
            network["value_head"] = self.cfg.value_head
        return network

    def setup(self, game: Any, device: str) -> None:
        """Networks for the game (new ones, or the loaded ones checked against it), Adam, the replay."""
        cfg = self.cfg
        self.device = torch.device(device)
        network = self.network_spec(game)
        if self.net is not None and self.net.spec != network:
            raise ConfigError(f"the checkpoint's network is {self.net.spec}, and agent.* asks for {network}")
        if self.net is None:
            self.net = PolicyValueNet(**network)
        self.net.to(self.device).eval()
        if self.best is None or not cfg.gating:
            self.best = self.net if not cfg.gating else copy.deepcopy(self.net)
        self.best.to(self.device).eval()
        # The rate of each phase is train_phase's (agent.learning_rate may be a schedule).
        # On a GPU Adam's update is one fused kernel (its state is the same as the loop's).
        self.optimizer = torch.optim.Adam(
            self.net.parameters(), weight_decay=cfg.l2, fused=self.device.type == "cuda"
        )
        if self._restored is not None:
            if self._restored.get("optimizer"):
                self.optimizer.load_state_dict(_for_this_device(self._restored["optimizer"], self.optimizer))
            if "torch_rng" in self._restored:  # a shipped agent holds its network only
                torch.set_rng_state(self._restored["torch_rng"])
            self._restored = None
        self.on_device, self._device = self.device.type == "cuda", None
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
            planes, policies, outcomes = np.stack(record.planes), np.stack(record.policies), record.outcomes()
            with self._replay_lock:
                self.replay.add(planes, policies, outcomes)
        self._record(
            (
                ("selfplay/game_length", record.moves),
                ("selfplay/recorded_share", len(record) / max(record.moves, 1)),
                ("selfplay/black_win_rate", float(record.winner == 1)),
                ("selfplay/draw_rate", float(record.winner == 0)),
                ("selfplay/weights_lag", float(lag)),
            )
        )

    def _record(self, pairs: Any) -> None:
        with self._stats_lock:
            for key, value in pairs:
                self.stats.setdefault(key, []).append(value)

    def train_phase(self, rng: np.random.Generator, learning_rate: float) -> None:
        """`updates_per_phase` gradient steps on batches of the replay (`device_training.losses`): on
        a GPU from the replay's copy there, as CUDA graph launches; elsewhere from the replay here."""
        cfg, net, optimizer, replay = self.cfg, self.net, self.optimizer, self.replay
        assert net is not None and optimizer is not None and replay is not None
        if self.on_device:
            if self._device is None:
                self._device = DeviceUpdates(
                    net, optimizer, DeviceReplay(replay, self.device), cfg.batch_size
                )
            with self._replay_lock:
                self._device.replay.sync()
            stats = self._device.phase(cfg.updates_per_phase, learning_rate)
        else:
            stats = self._eager_phase(rng, learning_rate)
        read = stats.cpu().numpy()  # once the phase is over: on a GPU a read waits for it
        keys = ("train/policy_loss", "train/value_loss", "train/policy_entropy")
        self._record((key, float(v)) for i, key in enumerate(keys) for v in read[:, i])

    def _eager_phase(self, rng: np.random.Generator, learning_rate: float) -> torch.Tensor:
        cfg, net, optimizer, replay = self.cfg, self.net, self.optimizer, self.replay
        assert net is not None and optimizer is not None and replay is not None
        for group in optimizer.param_groups:
            group["lr"] = learning_rate
        net.train()
        stats: list[torch.Tensor] = []
        for _ in range(cfg.updates_per_phase):
            with self._replay_lock:
                planes, policy, value = replay.sample(cfg.batch_size, rng)
            x = torch.from_numpy(planes).to(self.device)
            pi = torch.from_numpy(policy).to(self.device)
            z = torch.from_numpy(value).to(self.device)
            loss, policy_loss, value_loss, entropy = losses(net, x, pi, z)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            stats.append(torch.stack([policy_loss.detach(), value_loss.detach(), entropy]))
        net.eval()
        return torch.stack(stats)

    def take_stats(self) -> dict[str, float]:
        with self._stats_lock:
            stats, self.stats = self.stats, {}
        return {key: float(np.mean(values)) for key, values in stats.items() if values}

    def weights(self, which: str = "best") -> dict[str, np.ndarray]:
        """A network's weights as arrays (what the inference service is given)."""
        net = self.best if which == "best" else self.net
        assert net is not None
        # Copies (a CPU tensor's .numpy() is the tensor): a trainer thread goes on training them.
        return {key: t.detach().to("cpu", copy=True).numpy() for key, t in net.state_dict().items()}

    def accept(self, weights: dict[str, np.ndarray] | None = None) -> None:
        """The trained network (or the one of `weights`, the gate's candidate, where training went on
        during the gate) becomes the best (a gate it passed)."""
        assert self.net is not None and self.best is not None
        with self.lock:
            if weights is None:
                self.best.load_state_dict(self.net.state_dict())
            else:
                self.best.load_state_dict({k: torch.from_numpy(np.asarray(v)) for k, v in weights.items()})

    def save(self, path: Path) -> dict[str, Any]:
        """Weights, Adam and the torch RNG to `path` (and the replay); the network's spec back."""
        assert self.net is not None and self.best is not None
        with self.lock, self._replay_lock:
            return self._save(path)

    def _save(self, path: Path) -> dict[str, Any]:
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

    def expect(self, game: Any) -> None:
        """The run's game: a checkpoint loaded after this must have been trained on it, as agent.* asks."""
        self._expected_game = game

    def load(self, path: Path, spec: dict[str, Any], game_spec: dict[str, Any] | None = None) -> None:
        game = self._expected_game
        if game is not None:
            if game_spec is not None and game_spec != dict(game.spec):
                raise ValueError(
                    f"the checkpoint was trained on {game_spec}, and this run's game is {dict(game.spec)}"
                )
            asked = self.network_spec(game)
            if spec != asked:
                raise ValueError(f"the checkpoint's network is {spec}, and agent.* asks for {asked}")
        weights = torch.load(path / WEIGHTS_FILE, map_location="cpu", weights_only=True)
        self.net = PolicyValueNet(**spec)
        self.net.load_state_dict(weights.get("net", weights["best"]))  # shipped: the best one only
        self.best = self.net if not self.cfg.gating else copy.deepcopy(self.net)
        self.best.load_state_dict(weights["best"])
        self.net.eval()
        self.best.eval()
        self._restored = weights
        self._restored_replay = path / REPLAY_FILE if (path / REPLAY_FILE).is_file() else None


def _for_this_device(saved: dict[str, Any], optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """Adam's saved state with this optimizer's way of running (fused or not, capturable or not: a
    run on a GPU saves fused and capturable groups and a tensor learning rate, which a CPU cannot
    run, and a CPU run's state resumes on a GPU), so that loading it puts its steps where they run."""
    fresh = optimizer.state_dict()["param_groups"]
    groups = []
    for group, mine in zip(saved["param_groups"], fresh, strict=True):
        group = dict(group)
        for key in ("fused", "capturable", "foreach"):
            if key in mine:
                group[key] = mine[key]
        group["lr"] = float(group["lr"])
        groups.append(group)
    return {**saved, "param_groups": groups}
