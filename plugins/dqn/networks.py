"""Q networks: an MLP for vector observations, the Nature CNN for stacked image frames."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

ACTIVATIONS: dict[str, type[nn.Module]] = {
    "relu": nn.ReLU,
    "tanh": nn.Tanh,
    "elu": nn.ELU,
    "gelu": nn.GELU,
    "silu": nn.SiLU,
    "leaky_relu": nn.LeakyReLU,
}
ACTIVATION_FUNCTIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": F.relu,
    "tanh": torch.tanh,
    "elu": F.elu,
    "gelu": F.gelu,
    "silu": F.silu,
    "leaky_relu": F.leaky_relu,
}
#: The activations in numpy, for acting on the CPU (GELU has none: numpy has no erf).
NUMPY_ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "relu": lambda x: np.maximum(x, 0.0, out=x),
    "tanh": lambda x: np.tanh(x, out=x),
    "elu": lambda x: np.where(x > 0.0, x, np.expm1(np.minimum(x, 0.0))),
    "silu": lambda x: x / (1.0 + np.exp(-x)),
    "leaky_relu": lambda x: np.where(x > 0.0, x, 0.01 * x),
}
NETWORKS = ("auto", "mlp", "cnn")


def activation_name(name: str) -> str:
    """The activation's canonical name, or a ValueError listing the valid ones."""
    if name.lower() not in ACTIVATIONS:
        raise ValueError(f"agent.activation={name!r} is not valid; choose one of {', '.join(ACTIVATIONS)}")
    return name.lower()


def activation_class(name: str) -> type[nn.Module]:
    return ACTIVATIONS[activation_name(name)]


def is_image(shape: Sequence[int], dtype: str) -> bool:
    """uint8 observations of shape (H, W) or (frames, H, W): what the Nature CNN takes."""
    return dtype == "uint8" and len(shape) in (2, 3)


def dueling_matrix(n_actions: int) -> torch.Tensor:
    """M such that out @ M turns [V, A_1 … A_n] into Q_a = V + A_a − mean_b A_b (Wang et al., 2016):
    one small matmul, where slicing and averaging would be five operations, each with its
    backward."""
    matrix = torch.zeros(n_actions + 1, n_actions)
    matrix[0] = 1.0
    matrix[1:] = torch.eye(n_actions) - 1.0 / n_actions
    return matrix


class DuelingHead(nn.Module):
    """A linear layer giving V(s) and A(s, ·), combined into Q(s, ·) (or plain Q values)."""

    combine: torch.Tensor | None

    def __init__(self, width: int, n_actions: int, dueling: bool) -> None:
        super().__init__()
        self.linear = nn.Linear(width, n_actions + int(dueling))
        self.register_buffer("combine", dueling_matrix(n_actions) if dueling else None, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.linear(x, self.linear.weight, self.linear.bias)
        return out if self.combine is None else out @ self.combine


class MLPQNetwork(nn.Module):
    """Flattened observation → hidden layers → one Q value per action.

    The forward pass calls the layers' functions directly rather than through nn.Sequential:
    with small layers, the per-module call overhead is a large part of a gradient step.
    """

    def __init__(
        self, obs_dim: int, n_actions: int, hidden_sizes: Sequence[int], activation: str, dueling: bool
    ) -> None:
        super().__init__()
        widths = [obs_dim, *hidden_sizes]
        self.hidden = [nn.Linear(a, b) for a, b in itertools.pairwise(widths)]
        self.layers = nn.ModuleList(self.hidden)
        self.head = DuelingHead(widths[-1], n_actions, dueling)
        self.activation_name = activation_name(activation)
        self.activation = ACTIVATION_FUNCTIONS[self.activation_name]

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs.flatten(1).float()
        for layer in self.hidden:
            x = self.activation(F.linear(x, layer.weight, layer.bias))
        return self.head(x)

    def numpy_q_values(self) -> Callable[[np.ndarray], np.ndarray] | None:
        """This network's Q values in numpy, on views of its parameters, so always current while
        they are updated in place; for a few observations on the CPU about 3× faster than torch's
        per-call overhead. None when the parameters are not on the CPU or the activation has no
        numpy form."""
        act = NUMPY_ACTIVATIONS.get(self.activation_name)
        if act is None or self.head.linear.weight.device.type != "cpu":
            return None
        hidden = [(layer.weight.detach().numpy().T, layer.bias.detach().numpy()) for layer in self.hidden]
        head = self.head.linear.weight.detach().numpy().T, self.head.linear.bias.detach().numpy()
        combine = None if self.head.combine is None else self.head.combine.numpy()

        def q_values(obs: np.ndarray) -> np.ndarray:
            x = obs.reshape(len(obs), -1).astype(np.float32, copy=False)
            for weight, bias in hidden:
                x = act(x @ weight + bias)
            out = x @ head[0] + head[1]
            return out if combine is None else out @ combine

        return q_values


class NatureCNN(nn.Module):
    """Mnih et al. (2015): three conv layers, a 512-unit layer; uint8 frames are scaled by 1/255 here,
    on the network's device, so batches travel as bytes."""

    def __init__(self, obs_shape: Sequence[int], n_actions: int, activation: str, dueling: bool) -> None:
        super().__init__()
        act = activation_class(activation)
        channels = obs_shape[0] if len(obs_shape) == 3 else 1
        self.features = nn.Sequential(
            nn.Conv2d(channels, 32, 8, stride=4),
            act(),
            nn.Conv2d(32, 64, 4, stride=2),
            act(),
            nn.Conv2d(64, 64, 3, stride=1),
            act(),
            nn.Flatten(),
        )
        with torch.no_grad():
            width = self.features(torch.zeros(1, channels, *obs_shape[-2:])).shape[1]
        self.head = nn.Sequential(nn.Linear(width, 512), act(), DuelingHead(512, n_actions, dueling))
        self.image_dims = len(obs_shape)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs.float().mul_(1.0 / 255.0)
        if self.image_dims == 2:
            x = x.unsqueeze(1)
        return self.head(self.features(x))


def build_q_network(
    kind: str,
    obs_shape: Sequence[int],
    obs_dtype: str,
    n_actions: int,
    *,
    hidden_sizes: Sequence[int],
    activation: str,
    dueling: bool = False,
) -> nn.Module:
    """The Q network for these observations; `auto` picks the CNN for uint8 frames, else the MLP."""
    if kind not in NETWORKS:
        raise ValueError(f"agent.network={kind!r} is not valid; choose one of {', '.join(NETWORKS)}")
    if kind == "auto":
        kind = "cnn" if is_image(obs_shape, obs_dtype) else "mlp"
    if kind == "cnn":
        if len(obs_shape) not in (2, 3):
            raise ValueError(
                "agent.network=cnn needs observations shaped (H, W) or (frames, H, W), "
                f"not {tuple(obs_shape)}"
            )
        return NatureCNN(obs_shape, n_actions, activation, dueling)
    obs_dim = 1
    for size in obs_shape:
        obs_dim *= int(size)
    return MLPQNetwork(obs_dim, n_actions, hidden_sizes, activation, dueling)
