"""The policy-value network run by ONNX Runtime: the same evaluator as NetworkEvaluator, a faster CPU forward.

The network is exported to ONNX in memory (torch's TorchScript exporter, which needs the `onnx`
package) and run in an InferenceSession; whenever the network's weights change (a training step,
load_weights) the next call exports it again (~0.1 s for the 15x15 default network).
`benchmarks/mcts_speed.py --section 3` compares the two backends.
"""

from __future__ import annotations

import io
import logging
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from .network import NetworkEvaluator, PolicyValueNet

log = logging.getLogger("framework")

INPUT, OUTPUTS, DRAW = "planes", ("logits", "value"), "draw"


class OnnxEvaluator(NetworkEvaluator):
    """A network's batched policy-value function, evaluated by ONNX Runtime and kept in step with it.

    `threads` is ONNX Runtime's intra-op thread count; by default as many as torch uses in this
    process (one per worker, or an inference actor's CPUs), so swapping backends keeps the budget.
    """

    def __init__(
        self, net: PolicyValueNet, device: torch.device | str, *, threads: int | None = None
    ) -> None:
        super().__init__(net, device)
        self.backend = "onnxruntime"
        self.threads = max(1, threads if threads is not None else torch.get_num_threads())
        self.providers = providers_for(self.device)
        self._session: Any = None
        self._exported_version: int | None = None
        self._tensors: list[torch.Tensor] = []
        self._outputs: list[str] = list(OUTPUTS)
        self._export()

    def load_weights(self, weights: Mapping[str, Any]) -> None:
        super().load_weights(weights)
        self._export()

    def __call__(self, planes: np.ndarray) -> tuple[np.ndarray, ...]:
        # The tensors listed at the export, not walked through the modules again: 5 us a call, not 100.
        if sum(t._version for t in self._tensors) != self._exported_version:
            self._export()  # the network was trained or loaded since: evaluate the weights it has now
        self.positions += len(planes)
        feed = {INPUT: np.ascontiguousarray(planes, dtype=np.float32)}
        return tuple(self._session.run(self._outputs, feed))

    def _export(self) -> None:
        """Export the network as it is now (in eval mode: batch norm from its running statistics) and
        open a session on it."""
        import onnxruntime as ort

        net, spec = self.net, self.net.spec
        self._outputs = [*OUTPUTS, *([DRAW] if net.wdl else [])]
        example = torch.zeros(1, spec["in_planes"], spec["board_size"], spec["board_size"])
        model = io.BytesIO()
        training = net.training
        net.eval()
        try:
            with warnings.catch_warnings():
                # The TorchScript exporter is the one that needs no onnxscript; torch warns it is legacy.
                warnings.simplefilter("ignore", DeprecationWarning)
                torch.onnx.export(
                    net,
                    (example.to(next(net.parameters()).device),),
                    model,  # type: ignore[arg-type]  # a file-like object works; torch's annotation says path
                    dynamo=False,
                    input_names=[INPUT],
                    output_names=self._outputs,
                    dynamic_axes={name: {0: "batch"} for name in (INPUT, *self._outputs)},
                )
        finally:
            net.train(training)
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Its workers sleep between calls rather than spin: the tree's kernels and the training take
        # the cores between two calls (the 9x9 preset network's self-play on 2 threads, mcts_speed.py
        # section 2: 1.17x the spinning one).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = ort.InferenceSession(model.getvalue(), options, providers=self.providers)
        self._tensors = [*net.parameters(), *net.buffers()]
        self._exported_version = sum(t._version for t in self._tensors)
        wanted, got = self.providers[0][0], self._session.get_providers()[0]
        if got != wanted:  # onnxruntime falls back by itself when a provider's libraries fail to load
            log.warning("onnxruntime: %s did not start (see its log above): evaluating on %s", wanted, got)


def providers_for(device: torch.device) -> list[tuple[str, dict[str, Any]]]:
    """ONNX Runtime's execution providers for `device`: CUDA's where asked for and onnxruntime offers it
    (the onnxruntime-gpu package), else the CPU's, saying so."""
    import onnxruntime as ort

    if device.type != "cuda":
        return [("CPUExecutionProvider", {})]
    available = ort.get_available_providers()
    if "CUDAExecutionProvider" in available:
        return [("CUDAExecutionProvider", {"device_id": device.index or 0}), ("CPUExecutionProvider", {})]
    log.warning(
        "onnxruntime %s offers no CUDAExecutionProvider (only %s; install onnxruntime-gpu for it):"
        " evaluating on the CPU",
        ort.__version__,
        ", ".join(available),
    )
    return [("CPUExecutionProvider", {})]
