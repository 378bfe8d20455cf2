"""The Q-learning update: online and target networks, Adam, TD targets, training statistics.

A train phase samples all its minibatches in one draw and moves them to the device at once.
The target network only changes between env steps (`sync_target`), so within a phase it is
fixed and its values for every minibatch come from one forward pass. Statistics accumulate
on the device and are read (one sync) only when logged.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .adam import ClippedAdam
from .networks import MLPQNetwork

LOSSES = ("huber", "mse")
#: Rows per forward pass of the target network over a train phase's next observations.
TARGET_CHUNK = 1024
BATCH_KEYS = ("observations", "actions", "rewards", "next_observations", "dones")


def td_targets(
    rewards: torch.Tensor,
    dones: torch.Tensor,
    gamma: float,
    target_q_next: torch.Tensor,
    online_q_next: torch.Tensor | None = None,
) -> torch.Tensor:
    """r + γ·(1 − done)·V(s'); V = max_a Q_target(s', a), or with `online_q_next` (double-Q)
    Q_target(s', argmax_a Q_online(s', a)). `done` is termination only: truncated episodes bootstrap."""
    if online_q_next is None:
        next_values = target_q_next.max(dim=1).values
    else:
        best = online_q_next.argmax(dim=1, keepdim=True)
        next_values = target_q_next.gather(1, best).squeeze(1)
    return rewards + gamma * next_values * dones.logical_not()


class BatchTransfer:
    """Sampled numpy batches as tensors on the device: zero-copy on the CPU, through reused pinned
    host tensors and asynchronous copies on a GPU."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._pinned: dict[str, torch.Tensor] = {}
        self._copied: Any = None  # a CUDA event: the last copies out of the pinned tensors are done

    def __call__(self, batch: Mapping[str, np.ndarray]) -> dict[str, torch.Tensor]:
        if self.device.type != "cuda":
            return {key: torch.from_numpy(batch[key]) for key in BATCH_KEYS}
        if self._copied is not None:
            self._copied.synchronize()  # never overwrite a pinned tensor that is still being copied
        out = {}
        for key in BATCH_KEYS:
            array = batch[key]
            host = self._pinned.get(key)
            if host is None or tuple(host.shape) != array.shape:
                host = self._pinned[key] = torch.empty(
                    array.shape, dtype=torch.from_numpy(array[:0]).dtype, pin_memory=True
                )
            host.copy_(torch.from_numpy(array))
            out[key] = host.to(self.device, non_blocking=True)
        self._copied = torch.cuda.Event()
        self._copied.record()
        return out


class QLearner:
    """Online and target Q networks, Adam with gradient-norm clipping, the TD loss."""

    def __init__(
        self,
        online: nn.Module,
        *,
        device: str,
        gamma: float,
        double_q: bool,
        loss: str,
        max_grad_norm: float | None,
        adam_eps: float,
    ) -> None:
        if loss not in LOSSES:
            raise ValueError(f"agent.loss={loss!r} is not valid; choose one of {', '.join(LOSSES)}")
        self.device = torch.device(device)
        self.online = online.to(self.device)
        self.target = copy.deepcopy(self.online).requires_grad_(False)
        self.gamma = gamma
        self.double_q = double_q
        self.loss_fn = F.smooth_l1_loss if loss == "huber" else F.mse_loss
        self.params: list[torch.Tensor] = list(self.online.parameters())
        self.optimizer = ClippedAdam(self.params, eps=adam_eps, max_grad_norm=max_grad_norm)
        self.transfer = BatchTransfer(self.device)
        self._numpy_q_values = self.online.numpy_q_values() if isinstance(self.online, MLPQNetwork) else None
        self.n_updates = 0
        # Per gradient step, kept on the device until logged: (loss, Q(s, a) of the batch, gradient norm).
        self._stats: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []

    def set_learning_rate(self, value: float) -> None:
        self.optimizer.learning_rate = value

    def targets(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """TD targets of a batch (on the device), with the current networks."""
        with torch.no_grad():
            next_obs = batch["next_observations"]
            online_next = self.online(next_obs) if self.double_q else None
            return td_targets(
                batch["rewards"], batch["dones"], self.gamma, self.target(next_obs), online_next
            )

    def train_phase(self, sampled: Mapping[str, np.ndarray], batch_size: int) -> None:
        """Gradient steps on consecutive minibatches of `sampled` (one draw of n × batch_size)."""
        batch = self.transfer(sampled)
        with torch.no_grad():
            # In chunks, so that the hidden activations stay in the CPU's cache.
            next_q = torch.cat([self.target(x) for x in batch["next_observations"].split(TARGET_CHUNK)])
            columns = [batch["observations"], batch["actions"].unsqueeze(1)]
            if self.double_q:  # a' comes from the online network as it is at each step
                columns += [batch["next_observations"], batch["rewards"], batch["dones"], next_q]
            else:
                columns.append(td_targets(batch["rewards"], batch["dones"], self.gamma, next_q))
        for minibatch in zip(*(column.split(batch_size) for column in columns), strict=True):
            if self.double_q:
                obs, actions, next_obs, rewards, dones, target_q = minibatch
                with torch.no_grad():
                    targets = td_targets(rewards, dones, self.gamma, target_q, self.online(next_obs))
            else:
                obs, actions, targets = minibatch
            self._step(self.online(obs).gather(1, actions).squeeze(1), targets)

    def _step(self, q: torch.Tensor, targets: torch.Tensor) -> None:
        loss = self.loss_fn(q, targets)
        self.optimizer.zero_grad()
        loss.backward()
        grad_norm = self.optimizer.step()
        self.n_updates += 1
        self._stats.append((loss.detach(), q.detach(), grad_norm))

    def sync_target(self, tau: float) -> None:
        """target ← τ·online + (1 − τ)·target (τ = 1: a copy)."""
        with torch.no_grad():
            for target, online in zip(self.target.parameters(), self.params, strict=True):
                if tau >= 1.0:
                    target.copy_(online)
                else:
                    target.lerp_(online, tau)

    def pop_stats(self) -> dict[str, float]:
        """Means since the last call (empty if no update happened); reads the device once."""
        if not self._stats:
            return {}
        losses, qs, norms = zip(*self._stats, strict=True)
        means = torch.stack((torch.stack(losses).mean(), torch.cat(qs).mean(), torch.stack(norms).mean()))
        self._stats.clear()
        loss, q_mean, grad_norm = means.tolist()
        return {"train/loss": loss, "train/q_mean": q_mean, "train/grad_norm": grad_norm}

    def greedy(self, obs: np.ndarray) -> np.ndarray:
        """argmax_a Q(obs, a) for a batch of observations (in numpy when the network offers it)."""
        if self._numpy_q_values is not None:
            return self._numpy_q_values(obs).argmax(axis=1)
        with torch.no_grad():
            x = torch.from_numpy(np.ascontiguousarray(obs)).to(self.device)
            return self.online(x).argmax(dim=1).cpu().numpy()

    def state_dict(self) -> dict[str, Any]:
        return {
            "online": self.online.state_dict(),
            "target": self.target.state_dict(),
            "optimizer": self.optimizer.state_dict(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.online.load_state_dict(state["online"])
        self.target.load_state_dict(state["target"])
        if "optimizer" in state:
            self.optimizer.load_state_dict(state["optimizer"])
