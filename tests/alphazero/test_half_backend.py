"""search.inference.backend=torch_half: the network with its batch norms folded, in half precision,
agreeing with eager fp32 and kept in step with the network's weights. (Its CUDA graphs run on a
GPU only: benchmarks/inference_backends.py checks them there, against the same agreement.)"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from framework_plugins.alphazero.half_evaluator import AUTO_TOP_MOVE, AUTO_VALUE, HalfEvaluator, folded
from framework_plugins.alphazero.network import (
    BACKENDS,
    NetworkEvaluator,
    build_evaluator,
    evaluator_for,
    resolved,
)
from framework_plugins.mcts.config import BACKENDS as CONFIG_BACKENDS
from tests.alphazero.test_onnx_backend import SMALL, SPECS, random_net, random_planes, torch_outputs


def agreement(a: tuple[np.ndarray, ...], b: tuple[np.ndarray, ...]) -> tuple[float, float]:
    """(share of positions whose top move is the same, largest value difference)."""
    return float((a[0].argmax(1) == b[0].argmax(1)).mean()), float(np.abs(a[1] - b[1]).max())


@pytest.mark.parametrize("name", list(SPECS))
def test_folding_the_batch_norms_keeps_the_function(name: str) -> None:
    spec = SPECS[name]
    net, planes = random_net(spec, seed=1), random_planes(spec, 64, seed=0)
    fused = folded(net)
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in fused.modules())
    with torch.inference_mode():
        got = tuple(out.numpy() for out in fused(torch.from_numpy(planes)))
    expected = torch_outputs(net, planes)
    assert max(float(np.abs(x - y).max()) for x, y in zip(got, expected, strict=True)) <= 1e-5
    assert any(isinstance(m, torch.nn.BatchNorm2d) for m in net.modules())  # the network is left as it was


@pytest.mark.parametrize("name", ["9x9 preset", "9x9 win/draw/loss"])
def test_fp16_agrees_with_fp32_on_the_top_move_and_the_value(name: str) -> None:
    """What `auto` requires of it on a GPU, here with fp16 on the CPU (the same rounding)."""
    spec = SPECS[name]
    net, planes = random_net(spec, seed=3), random_planes(spec, 256, seed=1)
    half = HalfEvaluator(net, "cpu", dtype=torch.float16)
    out = half(planes)
    top, value = agreement(out, torch_outputs(net, planes))
    assert top >= AUTO_TOP_MOVE and value <= AUTO_VALUE, (top, value)
    assert all(o.dtype == np.float32 and len(o) == 256 for o in out)
    assert len(out) == (3 if spec.get("value_head") == "wdl" else 2)


def test_bf16_on_a_cpu_is_the_default_and_close() -> None:
    spec = SPECS["9x9 preset"]
    net, planes = random_net(spec, seed=3), random_planes(spec, 256, seed=1)
    half = build_evaluator(spec, "cpu", "torch_half")
    assert isinstance(half, HalfEvaluator) and half.dtype == torch.bfloat16
    half.load_weights(NetworkEvaluator(net, "cpu").weights())
    top, value = agreement(half(planes), torch_outputs(net, planes))
    assert top >= 0.95 and value <= AUTO_VALUE, (top, value)  # bf16 keeps 8 bits of mantissa, fp16 11


def test_new_weights_and_training_are_followed() -> None:
    spec = SMALL
    net, other = random_net(spec, seed=1), random_net(spec, seed=2)
    planes = random_planes(spec, 32, seed=0)
    half = evaluator_for(net, "cpu", "torch_half")
    assert isinstance(half, HalfEvaluator)
    half.load_weights(NetworkEvaluator(other, "cpu").weights())
    assert agreement(half(planes), torch_outputs(other, planes))[1] <= AUTO_VALUE
    net.load_state_dict(other.state_dict())
    net.train()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.5)
    logits, values = net(torch.from_numpy(random_planes(spec, 16, seed=3)))
    (logits.logsumexp(1).mean() + (values - 1).square().mean()).backward()
    optimizer.step()
    net.eval()
    trained = torch_outputs(net, planes)
    assert np.abs(trained[1] - torch_outputs(other, planes)[1]).max() > 10 * AUTO_VALUE
    assert agreement(half(planes), trained)[1] <= AUTO_VALUE  # the trained weights, not those it was given


def test_the_portable_builder_rebuilds_the_half_backend() -> None:
    net = random_net(SMALL, seed=1)
    local = evaluator_for(net, "cpu", "torch_half")
    remote = pickle.loads(pickle.dumps(local.portable()))("cpu")
    assert type(remote) is HalfEvaluator
    remote.load_weights(local.weights())
    planes = random_planes(SMALL, 8, seed=0)
    np.testing.assert_allclose(remote(planes)[0], local(planes)[0], atol=1e-6)


def test_auto_is_onnxruntime_on_a_cpu_and_measured_on_a_gpu() -> None:
    assert resolved("auto", "cpu") == "onnxruntime"
    assert resolved("auto", "cuda") == resolved("auto", "cuda:1") == "gpu_auto"
    assert resolved("torch_half", "cpu") == "torch_half"
    assert set(BACKENDS) | {"auto"} == set(CONFIG_BACKENDS)
