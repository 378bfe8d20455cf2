"""Adam with gradient-norm clipping, in one pass of torch's fused Adam where the device has it.

For the small networks DQN trains, torch.optim.Adam.step's per-call bookkeeping and a separate
clipping pass over the gradients each cost about as much as the update itself. So the state
lives here and each step calls torch's functional Adam (`torch.optim.adam.adam`, the function
torch.optim.Adam runs) once, with the clipping folded in as its gradient scale: the gradients
are divided by max(1, ‖g‖ / max_grad_norm), as torch.nn.utils.clip_grad_norm_ would scale them.
Without a fused kernel (older torch, other devices) the multi-tensor Adam runs after clipping.
Only public torch functions are called (those in their modules' `__all__`).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.optim.adam import adam

BETAS = (0.9, 0.999)


class ClippedAdam:
    """Adam over `params` (no weight decay); `step()` clips the gradients' global norm first."""

    def __init__(self, params: list[torch.Tensor], *, eps: float, max_grad_norm: float | None) -> None:
        self.params = params
        self.eps = eps
        self.max_grad_norm = math.inf if max_grad_norm is None else float(max_grad_norm)
        self.learning_rate = 1e-3
        device = params[0].device
        self.fused = _has_fused_adam(device)
        self.exp_avgs = [torch.zeros_like(p) for p in params]
        self.exp_avg_sqs = [torch.zeros_like(p) for p in params]
        # The fused kernel keeps step counts on the device, the multi-tensor Adam on the CPU.
        step_device = device if self.fused else torch.device("cpu")
        self.steps = [torch.zeros((), dtype=torch.float32, device=step_device) for _ in params]

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def step(self) -> torch.Tensor:
        """Clip and apply the gradients; returns their global norm before clipping (on the device)."""
        grads: list[torch.Tensor] = [p.grad for p in self.params]  # type: ignore[misc]
        norm = total_norm(grads)
        scale = torch.clamp(norm / self.max_grad_norm, min=1.0) if self.max_grad_norm < math.inf else None
        options: dict[str, Any] = {
            "amsgrad": False, "lr": self.learning_rate, "beta1": BETAS[0], "beta2": BETAS[1],
            "weight_decay": 0.0, "eps": self.eps, "maximize": False,
        }  # fmt: skip
        with torch.no_grad():
            if self.fused:
                adam(self.params, grads, self.exp_avgs, self.exp_avg_sqs, [], self.steps,
                     fused=True, grad_scale=scale, **options)  # fmt: skip
            else:
                if scale is not None:
                    for grad in grads:
                        grad.div_(scale)
                adam(
                    self.params,
                    grads,
                    self.exp_avgs,
                    self.exp_avg_sqs,
                    [],
                    self.steps,
                    foreach=True,
                    **options,
                )
        return norm

    def state_dict(self) -> dict[str, Any]:
        return {
            "exp_avg": self.exp_avgs,
            "exp_avg_sq": self.exp_avg_sqs,
            "step": self.steps,
            "learning_rate": self.learning_rate,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key, mine in (("exp_avg", self.exp_avgs), ("exp_avg_sq", self.exp_avg_sqs), ("step", self.steps)):
            saved = state[key]
            if len(saved) != len(mine) or any(s.shape != m.shape for s, m in zip(saved, mine, strict=True)):
                raise ValueError(f"The checkpoint's optimizer state ({key}) does not fit this network")
            for m, s in zip(mine, saved, strict=True):
                m.copy_(s)
        self.learning_rate = float(state["learning_rate"])


def total_norm(tensors: list[torch.Tensor]) -> torch.Tensor:
    """The global 2-norm of `tensors`, as clip_grad_norm_ measures it (one pass on torch >= 2.6)."""
    if hasattr(torch.nn.utils, "get_total_norm"):  # torch >= 2.6
        return torch.nn.utils.get_total_norm(tensors, 2.0, foreach=True)
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(t) for t in tensors]))


def _has_fused_adam(device: torch.device) -> bool:
    """Whether this torch has a fused Adam for `device` (CPU: torch >= 2.4)."""
    zeros = [torch.zeros(1, device=device) for _ in range(3)]
    try:
        with torch.no_grad():
            adam(
                zeros[:1], zeros[1:2], zeros[2:], [torch.zeros(1, device=device)], [],
                [torch.zeros((), device=device)], fused=True,
                amsgrad=False, lr=0.0, beta1=0.9, beta2=0.999, weight_decay=0.0, eps=1e-8, maximize=False,
            )  # fmt: skip
    except (RuntimeError, NotImplementedError, TypeError):
        return False
    return True
