"""ClippedAdam: the same updates as torch.nn.utils.clip_grad_norm_ followed by torch.optim.Adam."""

from __future__ import annotations

import pytest
import torch

from framework_plugins.dqn.adam import ClippedAdam


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("max_grad_norm", [0.5, None])
def test_updates_match_clip_grad_norm_then_torch_adam(fused: bool, max_grad_norm: float | None) -> None:
    torch.manual_seed(0)
    ours_params = [torch.randn(6, 4, requires_grad=True), torch.randn(4, requires_grad=True)]
    ref_params = [p.detach().clone().requires_grad_(True) for p in ours_params]
    ours = ClippedAdam(ours_params, eps=1e-6, max_grad_norm=max_grad_norm)
    assert ours.fused  # torch 2.13 has a fused CPU kernel; older ones take the other path
    if not fused:
        ours.fused = False
    reference = torch.optim.Adam(ref_params, lr=0.01, eps=1e-6)
    ours.learning_rate = 0.01
    norms = []
    for _ in range(5):
        grads = [torch.randn_like(p) * 3 for p in ours_params]
        for p, g in zip(ours_params, grads, strict=True):
            p.grad = g.clone()
        norms.append(ours.step().item())
        for p, g in zip(ref_params, grads, strict=True):
            p.grad = g.clone()
        expected = torch.nn.utils.clip_grad_norm_(ref_params, max_grad_norm or float("inf"))
        assert norms[-1] == pytest.approx(expected.item(), rel=1e-5)
        reference.step()
        for mine, theirs in zip(ours_params, ref_params, strict=True):
            torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-6)


def test_state_round_trips_and_refuses_another_network() -> None:
    params = [torch.zeros(3, requires_grad=True)]
    adam = ClippedAdam(params, eps=1e-8, max_grad_norm=None)
    params[0].grad = torch.ones(3)
    adam.step()
    copy = ClippedAdam([torch.zeros(3, requires_grad=True)], eps=1e-8, max_grad_norm=None)
    copy.load_state_dict(adam.state_dict())
    assert torch.equal(copy.exp_avgs[0], adam.exp_avgs[0]) and copy.steps[0].item() == 1.0
    other = ClippedAdam([torch.zeros(4, requires_grad=True)], eps=1e-8, max_grad_norm=None)
    with pytest.raises(ValueError, match=r"optimizer state \(exp_avg\) does not fit this network"):
        other.load_state_dict(adam.state_dict())
