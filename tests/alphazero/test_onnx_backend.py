"""The ONNX Runtime backend: the same function as eager torch, kept in step with the network's weights."""

from __future__ import annotations

import logging
import pickle
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
import torch

from framework_plugins.alphazero.network import (
    BACKENDS,
    NetworkEvaluator,
    PolicyValueNet,
    build_evaluator,
    evaluator_for,
)
from framework_plugins.alphazero.onnx_evaluator import OnnxEvaluator

pytest.importorskip("onnxruntime")

TOLERANCE = 1e-5
SPECS = {
    "9x9 preset": {"board_size": 9, "in_planes": 4, "blocks": 3, "channels": 32},
    "15x15 default": {"board_size": 15, "in_planes": 4, "blocks": 4, "channels": 64},
    "9x9 win/draw/loss": {"board_size": 9, "in_planes": 4, "blocks": 3, "channels": 32, "value_head": "wdl"},
}
SMALL = {"board_size": 6, "in_planes": 4, "blocks": 1, "channels": 8}


def random_net(spec: dict[str, Any], seed: int) -> PolicyValueNet:
    """A network with random weights and batch-norm statistics far from their defaults (0 mean, unit
    variance, unit scale), so eval-mode batch norm is really exercised."""
    torch.manual_seed(seed)
    net = PolicyValueNet(**spec)
    with torch.no_grad():
        for module in net.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.uniform_(-0.5, 0.5)
                module.running_var.uniform_(0.5, 2.0)
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.5, 0.5)
    return net.eval()


def random_planes(spec: dict[str, Any], batch: int, seed: int) -> np.ndarray:
    n = spec["board_size"]
    return (np.random.default_rng(seed).random((batch, spec["in_planes"], n, n)) < 0.3).astype(np.float32)


def torch_outputs(net: PolicyValueNet, planes: np.ndarray) -> tuple[np.ndarray, ...]:
    with torch.inference_mode():
        return tuple(out.numpy() for out in net(torch.from_numpy(planes)))


def largest_difference(a: tuple[np.ndarray, ...], b: tuple[np.ndarray, ...]) -> float:
    assert len(a) == len(b)
    return max(float(np.abs(x - y).max()) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("name", list(SPECS))
def test_onnxruntime_gives_torchs_logits_and_values_within_1e_5(name: str) -> None:
    spec = SPECS[name]
    net, other = random_net(spec, seed=1), random_net(spec, seed=2)
    evaluate = evaluator_for(net, "cpu", "onnxruntime")
    assert isinstance(evaluate, OnnxEvaluator)
    for batch in (1, 8, 128):
        planes = random_planes(spec, batch, seed=batch)
        out = evaluate(planes)
        logits, values = out[:2]
        assert logits.shape == (batch, spec["board_size"] ** 2) and values.shape == (batch,)
        assert logits.dtype == np.float32 and values.dtype == np.float32
        if spec.get("value_head") == "wdl":  # the draw probability third; value = P(win) - P(loss)
            assert len(out) == 3 and out[2].shape == (batch,) and out[2].dtype == np.float32
            assert (out[2] > 0).all() and (np.abs(values) + out[2] < 1 + 1e-6).all()
        else:
            assert len(out) == 2
        expected = torch_outputs(net, planes)
        assert largest_difference(out, expected) <= TOLERANCE
        # The tolerance tells networks apart: another network's outputs are far outside it.
        assert largest_difference(torch_outputs(other, planes), expected) > 1000 * TOLERANCE
    # ...and positions apart: the outputs are not one constant (a random win/draw/loss head's
    # P(win) - P(loss) spreads less than tanh's, but far beyond the tolerance still).
    spread = 100 if spec.get("value_head") == "wdl" else 1000
    assert (
        float(np.ptp(logits, axis=0).max()) > 1000 * TOLERANCE and float(np.ptp(values)) > spread * TOLERANCE
    )


def test_load_weights_makes_the_evaluator_another_networks_function() -> None:
    spec = SPECS["9x9 preset"]
    first, second = random_net(spec, seed=1), random_net(spec, seed=2)
    planes = random_planes(spec, 8, seed=0)
    evaluate = build_evaluator(spec, "cpu", "onnxruntime")
    evaluate.load_weights(NetworkEvaluator(first, "cpu").weights())
    assert largest_difference(evaluate(planes), torch_outputs(first, planes)) <= TOLERANCE
    evaluate.load_weights(NetworkEvaluator(second, "cpu").weights())
    assert largest_difference(evaluate(planes), torch_outputs(second, planes)) <= TOLERANCE
    assert largest_difference(evaluate(planes), torch_outputs(first, planes)) > 1000 * TOLERANCE


def test_a_network_trained_after_wrapping_is_evaluated_with_its_new_weights() -> None:
    spec = SMALL
    net = random_net(spec, seed=1)
    planes = random_planes(spec, 8, seed=0)
    evaluate = evaluator_for(net, "cpu", "onnxruntime")
    before = evaluate(planes)
    net.train()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    logits, values = net(torch.from_numpy(random_planes(spec, 16, seed=3)))
    (logits.logsumexp(1).mean() + values.square().mean()).backward()
    optimizer.step()
    after = evaluate(planes)
    assert net.training, "the evaluator leaves the network's mode as it found it"
    net.eval()
    assert largest_difference(after, torch_outputs(net, planes)) <= TOLERANCE
    assert largest_difference(after, before) > 1000 * TOLERANCE


def test_the_portable_builder_pickles_and_rebuilds_the_same_backend() -> None:
    spec = SMALL
    net = random_net(spec, seed=1)
    for backend, kind in (("onnxruntime", OnnxEvaluator), ("torch", NetworkEvaluator)):
        local = evaluator_for(net, "cpu", backend)
        remote = pickle.loads(pickle.dumps(local.portable()))("cpu")
        assert type(remote) is kind
        remote.load_weights(local.weights())
        planes = random_planes(spec, 8, seed=0)
        assert largest_difference(remote(planes), local(planes)) <= TOLERANCE


def test_an_unknown_backend_is_refused_naming_the_valid_ones() -> None:
    assert set(BACKENDS) == {"torch", "onnxruntime", "torch_half"}
    spec = SPECS["9x9 preset"]
    with pytest.raises(ValueError, match=r"'tensorrt'.*torch, onnxruntime"):
        build_evaluator(spec, "cpu", "tensorrt")
    with pytest.raises(ValueError, match=r"'onnx'.*torch, onnxruntime"):
        evaluator_for(random_net(spec, seed=1), "cpu", "onnx")


def test_threads_follow_torchs_unless_given() -> None:
    net = random_net(SPECS["9x9 preset"], seed=1)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert OnnxEvaluator(net, "cpu").threads == 1
        two = OnnxEvaluator(net, "cpu", threads=2)
        assert two.threads == 2
        # Its workers sleep between calls: the tree and the training take the cores meanwhile.
        options = two._session.get_session_options()
        assert options.intra_op_num_threads == 2
        assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    finally:
        torch.set_num_threads(threads)


def test_cuda_without_onnxruntimes_cuda_provider_falls_back_to_the_cpu_saying_so(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import onnxruntime

    # The pip onnxruntime (CPU only), wherever the test runs.
    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: ["CPUExecutionProvider"])
    spec = SPECS["9x9 preset"]
    with caplog.at_level(logging.WARNING, logger="framework"):
        evaluate = build_evaluator(spec, "cuda", "onnxruntime")
    assert "no CUDAExecutionProvider" in caplog.text and "onnxruntime-gpu" in caplog.text
    logits, _ = evaluate(random_planes(spec, 2, seed=0))
    assert logits.shape == (2, 81)


def test_importing_the_alphazero_plugin_imports_no_onnx() -> None:
    code = (
        "import sys, framework_plugins.alphazero.agent, framework_plugins.alphazero.network;"
        "print(sorted(m for m in ('onnxruntime', 'onnx') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "[]"
