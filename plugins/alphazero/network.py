"""The policy-value network: a residual tower with a policy head and a value head (AlphaGo Zero's).

The value head is AlphaGo Zero's scalar (tanh, trained by MSE to the outcome), or win/draw/loss
(`wdl`: three logits trained by cross-entropy to the outcome, as Leela Chess Zero's and KataGo's), whose
draw probability a search can weigh apart (`search.draw_contempt`).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
from torch import nn

from .config import VALUE_HEADS


class ResidualBlock(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(x + y)


class PolicyValueNet(nn.Module):
    """Planes [B, C, n, n] → (policy logits [B, n*n], value [B] in [-1, 1], the mover's view), and
    with a `wdl` value head the probability of a draw [B] third (the value is P(win) - P(loss))."""

    def __init__(
        self, *, board_size: int, in_planes: int, blocks: int, channels: int, value_head: str = "scalar"
    ) -> None:
        super().__init__()
        if value_head not in VALUE_HEADS:
            raise ValueError(f"unknown value head {value_head!r}: choose one of {', '.join(VALUE_HEADS)}")
        self.spec: dict[str, Any] = {
            "board_size": board_size,
            "in_planes": in_planes,
            "blocks": blocks,
            "channels": channels,
        }
        if value_head != "scalar":  # a scalar network's spec is as it was before the option
            self.spec["value_head"] = value_head
        self.wdl = value_head == "wdl"
        n_cells = board_size * board_size
        self.stem = nn.Sequential(
            nn.Conv2d(in_planes, channels, 3, padding=1, bias=False), nn.BatchNorm2d(channels), nn.ReLU()
        )
        self.tower = nn.Sequential(*[ResidualBlock(channels) for _ in range(blocks)])
        self.policy_conv = nn.Sequential(nn.Conv2d(channels, 2, 1, bias=False), nn.BatchNorm2d(2), nn.ReLU())
        self.policy_fc = nn.Linear(2 * n_cells, n_cells)
        self.value_conv = nn.Sequential(nn.Conv2d(channels, 1, 1, bias=False), nn.BatchNorm2d(1), nn.ReLU())
        outputs = 3 if self.wdl else 1
        self.value_fc = nn.Sequential(nn.Linear(n_cells, channels), nn.ReLU(), nn.Linear(channels, outputs))

    def heads(self, planes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(policy logits [B, n*n], the value head's output: [B, 1] before tanh, or WDL logits [B, 3])."""
        x = self.tower(self.stem(planes))
        logits = self.policy_fc(self.policy_conv(x).flatten(1))
        return logits, self.value_fc(self.value_conv(x).flatten(1))

    def forward(self, planes: torch.Tensor) -> tuple[torch.Tensor, ...]:
        logits, out = self.heads(planes)
        if not self.wdl:
            return logits, torch.tanh(out).squeeze(1)
        wdl = torch.softmax(out, dim=1)
        return logits, wdl[:, 0] - wdl[:, 2], wdl[:, 1]


class NetworkEvaluator:
    """The batched policy-value function of a live network, for a search engine (in inference mode)."""

    def __init__(self, net: PolicyValueNet, device: torch.device | str) -> None:
        self.net = net
        self.device = torch.device(device)
        self.positions = 0
        """Positions evaluated so far."""

    # -- portable (framework_plugins.boardgames.PortableEvaluator): rebuilt in a Ray actor, kept in step ----

    backend = "torch"

    def portable(self, backend: str | None = None) -> Callable[[str], NetworkEvaluator]:
        """`builder(device)`: this network's function by `backend` (this evaluator's own by default)."""
        backend_named(backend or self.backend)  # an unknown name is refused here, not in an actor
        return functools.partial(build_evaluator, dict(self.net.spec), backend=backend or self.backend)

    def weights(self) -> dict[str, np.ndarray]:
        return {key: t.detach().cpu().numpy() for key, t in self.net.state_dict().items()}

    def load_weights(self, weights: Mapping[str, Any]) -> None:
        # Arrays from Ray's object store are read-only: torch gets copies.
        self.net.load_state_dict({key: torch.from_numpy(np.array(v)) for key, v in weights.items()})
        self.net.eval()

    def __call__(self, planes: np.ndarray) -> tuple[np.ndarray, ...]:
        self.positions += len(planes)
        with torch.inference_mode():
            x = torch.from_numpy(planes).to(self.device, non_blocking=True)
            return tuple(out.float().cpu().numpy() for out in self.net(x))


BACKENDS: dict[str, str] = {
    "torch": "network:NetworkEvaluator",
    "onnxruntime": "onnx_evaluator:OnnxEvaluator",
    "torch_half": "half_evaluator:HalfEvaluator",
}
"""What evaluates a network, by name: eager torch, ONNX Runtime (a faster CPU forward at small
batches), or torch in half precision (fp16 and CUDA graphs on a GPU, bf16 on a CPU). Each is
`module:builder` in this package, `builder(net, device) -> NetworkEvaluator`, imported when one is
built: onnxruntime and the half-precision code stay out of the import of every plugin."""
#: `auto` on a GPU: the faster of torch_half and eager torch, measured as it is built.
GPU_AUTO = "half_evaluator:fastest_on_gpu"


def resolved(backend: str, device: str) -> str:
    """`auto` is ONNX Runtime on a CPU (1.5–3.5× eager torch there: benchmarks/inference_backends.py)
    and, on a GPU, the faster of torch_half and torch (`gpu_auto`, measured when the network is
    built); any other name is itself."""
    if backend == "auto":
        return "gpu_auto" if str(device).startswith("cuda") else "onnxruntime"
    return backend


def backend_named(backend: str) -> Callable[[PolicyValueNet, str], NetworkEvaluator]:
    """The evaluator builder of `backend`, one of BACKENDS (or `gpu_auto`, what auto is on a GPU)."""
    if backend not in BACKENDS and backend not in ("auto", "gpu_auto"):
        raise ValueError(f"unknown inference backend {backend!r}: choose one of auto, {', '.join(BACKENDS)}")
    module, name = (GPU_AUTO if backend == "gpu_auto" else BACKENDS.get(backend, BACKENDS["torch"])).split(
        ":"
    )
    builder: Callable[[PolicyValueNet, str], NetworkEvaluator] = getattr(
        importlib.import_module(f"{__package__}.{module}"), name
    )
    return builder


def evaluator_for(net: PolicyValueNet, device: str, backend: str = "torch") -> NetworkEvaluator:
    """The evaluator of a live network `net` on `device` by `backend` (one of BACKENDS), kept in step
    with its weights."""
    return backend_named(resolved(backend, device))(net, device)


def build_evaluator(spec: dict[str, Any], device: str, backend: str = "torch") -> NetworkEvaluator:
    """A network of `spec` on `device`, in inference mode, behind an evaluator by `backend` (its weights
    to be loaded)."""
    backend = resolved(backend, device)
    make = backend_named(backend)
    # ONNX Runtime runs its own copy of the weights on `device`: its network stays on the CPU.
    net = PolicyValueNet(**spec).to("cpu" if backend == "onnxruntime" else device).eval()
    return make(net, device)
