"""The policy-value network in half precision: `search.inference.backend=torch_half`.

A copy of the network with its batch norms folded into the convolutions, in fp16 on a GPU (bf16
on a CPU), channels-last; on a GPU each batch size is padded to a power of two and replayed from a
CUDA graph captured once per size (the network's ~30 kernels launched as one: the CPU no longer
paces the GPU at small batches), its input and outputs staged through pinned host memory. Whenever
the network's weights change (a training step, load_weights) the next call folds them again into
the same tensors, which the graphs read. `benchmarks/inference_backends.py` measures it beside
eager fp32 and checks that they agree.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn.utils.fusion import fuse_conv_bn_eval

from .network import NetworkEvaluator, PolicyValueNet

log = logging.getLogger("framework")

#: The largest batch a graph is captured for; a larger one goes in parts of this size.
LARGEST_GRAPH = 4096


def folded(net: PolicyValueNet) -> PolicyValueNet:
    """A copy of `net` (in eval mode) whose batch norms are folded into the convolutions before them."""
    out = copy.deepcopy(net).eval()

    def fuse(conv: Any, bn: Any) -> nn.Conv2d:
        assert isinstance(conv, nn.Conv2d) and isinstance(bn, nn.BatchNorm2d)
        return fuse_conv_bn_eval(conv, bn)

    with torch.no_grad():
        for seq in (out.stem, out.policy_conv, out.value_conv):
            seq[0], seq[1] = fuse(seq[0], seq[1]), nn.Identity()
        for block in out.tower:
            block.conv1, block.bn1 = fuse(block.conv1, block.bn1), nn.Identity()
            block.conv2, block.bn2 = fuse(block.conv2, block.bn2), nn.Identity()
    return out


class HalfEvaluator(NetworkEvaluator):
    """A network's batched policy-value function in half precision, kept in step with its weights."""

    backend = "torch_half"

    def __init__(
        self,
        net: PolicyValueNet,
        device: torch.device | str,
        *,
        dtype: torch.dtype | None = None,
        autotune: bool = True,
    ) -> None:
        super().__init__(net, device)
        self.cuda = self.device.type == "cuda"
        self.dtype = dtype or (torch.float16 if self.cuda else torch.bfloat16)
        """fp16 on a GPU; bf16 on a CPU, whose fp16 convolutions are slow (its rounding is coarser)."""
        self.autotune = autotune
        """cuDNN times its convolution algorithms for each graph's batch size before the capture
        (torch.backends.cudnn.benchmark, for those calls only): the graph keeps the fastest."""
        self._half = self._make_half()
        self._tensors: list[torch.Tensor] = []
        self._synced: int | None = None
        self._graphs: dict[int, tuple[Any, torch.Tensor, tuple[torch.Tensor, ...]]] = {}
        self._host: dict[int, tuple[torch.Tensor, tuple[torch.Tensor, ...]]] = {}
        self._pool: Any = None
        self._sync()

    def load_weights(self, weights: Mapping[str, Any]) -> None:
        super().load_weights(weights)
        self._sync()

    def __call__(self, planes: np.ndarray) -> tuple[np.ndarray, ...]:
        if sum(t._version for t in self._tensors) != self._synced:
            self._sync()  # trained or loaded since: evaluate the weights the network has now
        self.positions += len(planes)
        if not self.cuda:
            with torch.inference_mode():
                x = torch.from_numpy(np.ascontiguousarray(planes)).to(self.dtype)
                outs = self._half(x.contiguous(memory_format=torch.channels_last))
                return tuple(out.float().numpy() for out in outs)
        parts = [self._replay(planes[i : i + LARGEST_GRAPH]) for i in range(0, len(planes), LARGEST_GRAPH)]
        return parts[0] if len(parts) == 1 else tuple(np.concatenate(p) for p in zip(*parts, strict=True))

    # -- the half-precision copy and its graphs ---------------------------------------------------

    def _make_half(self) -> PolicyValueNet:
        half = folded(self.net).to(self.device, self.dtype)
        return half.to(memory_format=torch.channels_last)  # type: ignore[call-overload]

    def _sync(self) -> None:
        """Fold the network's weights of now into the half copy's tensors, in place (the graphs read them)."""
        with torch.no_grad():
            fresh = folded(self.net).to(self.device)
            for mine, new in zip(self._half.state_dict().values(), fresh.state_dict().values(), strict=True):
                mine.copy_(new)
        self._tensors = [*self.net.parameters(), *self.net.buffers()]
        self._synced = sum(t._version for t in self._tensors)

    def _replay(self, planes: np.ndarray) -> tuple[np.ndarray, ...]:
        n = len(planes)
        size = 1 << max(0, (n - 1).bit_length())
        graph, static_in, static_out = self._graph(size)
        host_in, host_out = self._host[size]
        host_in.numpy()[:n] = planes
        static_in.copy_(host_in, non_blocking=True)
        graph.replay()
        for host, out in zip(host_out, static_out, strict=True):
            host.copy_(out, non_blocking=True)
        torch.cuda.current_stream(self.device).synchronize()
        return tuple(host.numpy()[:n].copy() for host in host_out)

    def _graph(self, size: int) -> tuple[Any, torch.Tensor, tuple[torch.Tensor, ...]]:
        """The graph of a batch of `size`, captured on first use (its buffers, pinned host ones too)."""
        found = self._graphs.get(size)
        if found is not None:
            return found
        spec = self.net.spec
        shape = (size, spec["in_planes"], spec["board_size"], spec["board_size"])
        static_in = torch.zeros(shape, device=self.device, dtype=self.dtype).contiguous(
            memory_format=torch.channels_last
        )

        def forward() -> tuple[torch.Tensor, ...]:
            return tuple(out.float() for out in self._half(static_in))

        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        tuned = torch.backends.cudnn.benchmark
        torch.backends.cudnn.benchmark = self.autotune or tuned
        try:
            with torch.inference_mode(), torch.cuda.stream(side):
                for _ in range(3):  # warm-up outside the graph (cuDNN picks its algorithms)
                    forward()
            torch.cuda.current_stream(self.device).wait_stream(side)
            if self._pool is None:
                self._pool = torch.cuda.graph_pool_handle()
            graph = torch.cuda.CUDAGraph()
            # A capture stream of its own (torch's default one is shared by every thread), and
            # thread_local: a capture here stops nothing that another thread (self-play, a gate) does
            with (
                torch.inference_mode(),
                torch.cuda.graph(graph, pool=self._pool, stream=side, capture_error_mode="thread_local"),
            ):
                static_out = forward()
        finally:
            torch.backends.cudnn.benchmark = tuned
        host_in = torch.zeros(shape, dtype=torch.float32, pin_memory=True)
        host_out = tuple(torch.empty(out.shape, dtype=torch.float32, pin_memory=True) for out in static_out)
        self._host[size] = (host_in, host_out)
        self._graphs[size] = (graph, static_in, static_out)
        log.debug("torch_half: a CUDA graph for batches of %d", size)
        return self._graphs[size]


#: What `auto` weighs on a GPU: the batch it times, and the agreement with eager fp32 it needs.
AUTO_BATCH, AUTO_TOP_MOVE, AUTO_VALUE = 256, 0.99, 0.02


def fastest_on_gpu(net: PolicyValueNet, device: str) -> NetworkEvaluator:
    """`auto` on a GPU: torch_half where it agrees with eager fp32 (the top move on AUTO_TOP_MOVE of a
    batch of positions, the value within AUTO_VALUE) and is faster at AUTO_BATCH, else eager fp32."""
    import time

    eager, half = NetworkEvaluator(net, device), HalfEvaluator(net, device)
    rng = np.random.default_rng(0)
    spec = net.spec
    shape = (AUTO_BATCH, spec["in_planes"], spec["board_size"], spec["board_size"])
    planes = (rng.random(shape) < 0.15).astype(np.float32)
    (fp32, *rest32), (fp16, *rest16) = eager(planes), half(planes)
    top = float((fp32.argmax(1) == fp16.argmax(1)).mean())
    value = float(np.abs(rest32[0] - rest16[0]).max())
    rates = {}
    for name, evaluator in (("torch", eager), ("torch_half", half)):
        evaluator(planes)
        started = time.perf_counter()
        for _ in range(10):
            evaluator(planes)
        rates[name] = 10 * AUTO_BATCH / (time.perf_counter() - started)
    faster = rates["torch_half"] / rates["torch"]
    agrees = top >= AUTO_TOP_MOVE and value <= AUTO_VALUE
    chosen = half if agrees and faster > 1.0 else eager
    log.info(
        "inference backend auto on %s: %s (torch_half: %.2fx eager fp32 at batch %d, top move agreeing on"
        " %.1f%%, values within %.3f)",
        device,
        chosen.backend,
        faster,
        AUTO_BATCH,
        100 * top,
        value,
    )
    return chosen
