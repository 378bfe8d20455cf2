"""Training phases on a GPU with no Python between the updates: the replay mirrored on the device,
and one update (a batch drawn under random board symmetries, the forward and backward passes,
Adam's step) captured once as a CUDA graph, so that a phase of U updates is U graph launches.

On a GPU host an eager update costs ~150 kernel launches from Python (the autograd engine's thread
adding its own), and a trainer thread beside self-play spent about half of its wall time so, its
GIL beside the search's. The mirror takes the positions added since the last phase (a few MB) at
the phase's start. Without a GPU the same updates run eagerly (the unit tests' path).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from .network import PolicyValueNet
from .replay import PositionReplay

log = logging.getLogger("framework")

#: Eager updates before the capture (cuDNN chooses its algorithms, Adam makes its state): real ones.
WARM_UPDATES = 3


def losses(
    net: PolicyValueNet, x: torch.Tensor, pi: torch.Tensor, z: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """(loss, policy loss, value loss, policy entropy) of a batch: cross-entropy to π, and MSE to z
    (a scalar value head) or cross-entropy to z's class (win, draw, loss: a `wdl` head)."""
    logits, out = net.heads(x)
    log_p = F.log_softmax(logits, dim=1)
    policy_loss = -(pi * log_p).sum(1).mean()
    if net.wdl:  # z is 1, 0 or -1: classes 0 (win), 1 (draw), 2 (loss)
        value_loss = F.cross_entropy(out, (1 - z.round()).long())
    else:
        value_loss = F.mse_loss(torch.tanh(out).squeeze(1), z)
    with torch.no_grad():
        entropy = -(log_p.exp() * log_p).sum(1).mean()
    return policy_loss + value_loss, policy_loss, value_loss, entropy


class DeviceReplay:
    """A copy of a PositionReplay on the device, brought up to date by `sync`, sampled there."""

    def __init__(self, replay: PositionReplay, device: torch.device) -> None:
        self.replay, self.device = replay, device
        capacity, channels = replay.capacity, replay.planes.shape[1]
        self.cells = int(np.prod(replay.planes.shape[2:]))
        self.board = replay.planes.shape[2:]
        self.planes = torch.zeros((capacity, channels, self.cells), dtype=torch.uint8, device=device)
        self.policy = torch.zeros((capacity, replay.policy.shape[1]), dtype=torch.float32, device=device)
        self.value = torch.zeros(capacity, dtype=torch.float32, device=device)
        self.index = torch.from_numpy(replay.symmetry_index.astype(np.int64)).to(device)
        self.size = torch.zeros((), dtype=torch.float32, device=device)
        """The replay's size, read by the captured sampling (a tensor: the graph reads its value of now)."""
        self._added = 0

    def sync(self) -> int:
        """Copy the positions added since the last sync (all of them the first time); how many.
        The caller holds the replay still (the learner's replay lock)."""
        replay = self.replay
        new = replay.added - self._added
        if new <= 0:
            return 0
        if new >= replay.size:  # every stored row: rows [0, size) (a full ring: all of them)
            spans = [(0, replay.size)]
        else:  # the `new` rows before `next`, around the ring's end
            start = (replay.next - new) % replay.capacity
            end = start + new
            spans = (
                [(start, end)]
                if end <= replay.capacity
                else [(start, replay.capacity), (0, end - replay.capacity)]
            )
        for a, b in spans:
            self.planes[a:b].copy_(torch.from_numpy(replay.planes[a:b].reshape(b - a, -1, self.cells)))
            self.policy[a:b].copy_(torch.from_numpy(replay.policy[a:b]))
            self.value[a:b].copy_(torch.from_numpy(replay.value[a:b]))
        self.size.fill_(float(replay.size))
        self._added = replay.added
        return min(new, replay.size)

    def sample(self, batch_size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(planes float32 [B, C, n, n], policy [B, A], value [B]), each position under a random
        symmetry, drawn on the device (capturable: no host value is read)."""
        rows = (torch.rand(batch_size, device=self.device) * self.size).long()
        rows = torch.minimum(rows, (self.size - 1).long())  # a product rounded up to the size
        index = self.index[torch.randint(0, len(self.index), (batch_size,), device=self.device)]
        planes = self.planes[rows]
        planes = torch.gather(planes, 2, index[:, None, :].expand(-1, planes.shape[1], -1))
        planes = planes.to(torch.float32).view(batch_size, planes.shape[1], *self.board)
        policy = torch.gather(self.policy[rows], 1, index)
        return planes, policy, self.value[rows]


class DeviceUpdates:
    """A network's updates from a DeviceReplay: a CUDA graph of one on a GPU (captured at the first
    phase, after WARM_UPDATES eager ones), eager updates elsewhere or where the capture failed."""

    def __init__(
        self, net: PolicyValueNet, optimizer: torch.optim.Optimizer, replay: DeviceReplay, batch_size: int
    ) -> None:
        self.net, self.optimizer, self.replay, self.batch_size = net, optimizer, replay, batch_size
        self.device = replay.device
        self.graphed = self.device.type == "cuda"
        self._graph: Any = None
        self._stats: torch.Tensor | None = None
        self._stream: Any = None
        """The stream every update, eager or replayed, runs on (the capture's own): one per trainer."""
        if self.graphed:
            self._stream = torch.cuda.Stream(self.device)
            # Adam's learning rate a tensor the graph reads, its step capturable.
            for group in optimizer.param_groups:
                group["lr"] = torch.tensor(float(group["lr"]), device=self.device)
                group["capturable"] = True

    def phase(self, updates: int, learning_rate: float) -> torch.Tensor:
        """`updates` updates at `learning_rate`; their (policy loss, value loss, entropy) [U, 3], on
        the device (read once the phase is over)."""
        for group in self.optimizer.param_groups:
            if isinstance(group["lr"], torch.Tensor):
                group["lr"].fill_(learning_rate)
            else:
                group["lr"] = learning_rate
        self.net.train()
        out: list[torch.Tensor] = []
        try:
            if self._stream is None:
                self._updates(updates, out)
            else:  # on the updates' stream, after what the caller's did (the mirror's copies), and back
                current = torch.cuda.current_stream(self.device)
                self._stream.wait_stream(current)
                with torch.cuda.stream(self._stream):
                    self._updates(updates, out)
                current.wait_stream(self._stream)
        finally:
            self.net.eval()
        return torch.stack(out)

    def _updates(self, updates: int, out: list[torch.Tensor]) -> None:
        for _ in range(updates):
            if self._graph is None and self.graphed and len(out) >= WARM_UPDATES:
                self._capture()
            if self._graph is not None:
                self._graph.replay()
                assert self._stats is not None
                out.append(self._stats.clone())
            else:
                out.append(self._update())

    def _update(self) -> torch.Tensor:
        x, pi, z = self.replay.sample(self.batch_size)
        loss, policy_loss, value_loss, entropy = losses(self.net, x, pi, z)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        return torch.stack([policy_loss.detach(), value_loss.detach(), entropy])

    def _capture(self) -> None:
        """One update as a CUDA graph (its gradients, batch and Adam's state at fixed addresses);
        where the capture fails, eager updates from then on, said once."""
        graph = torch.cuda.CUDAGraph()
        self.optimizer.zero_grad(set_to_none=True)
        try:  # on the updates' stream: a capture stream of its own, whatever another thread captures
            with torch.cuda.graph(graph, stream=self._stream, capture_error_mode="thread_local"):
                stats = self._update()
        except Exception as e:  # an eager update is slower, not wrong
            log.warning("training updates as a CUDA graph failed (%s): eager updates instead", e)
            self.graphed = False
            self.optimizer.zero_grad(set_to_none=True)
            return
        self._graph, self._stats = graph, stats
        log.debug("training updates: a CUDA graph of one update of %d positions", self.batch_size)
