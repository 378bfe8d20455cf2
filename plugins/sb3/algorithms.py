"""Algorithm lookup and rl-zoo3-style hyperparameter parsing."""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import torch

from framework.errors import ConfigError, check_choice, closest, did_you_mean

from .ranges import check_range

SB3_ALGOS = ("A2C", "DDPG", "DQN", "PPO", "SAC", "TD3")
CONTRIB_ALGOS = ("ARS", "CrossQ", "MaskablePPO", "QRDQN", "RecurrentPPO", "TQC", "TRPO")
CONTRIB_INSTALL = 'pip install "framework[contrib]"'
#: Constructor arguments the framework sets itself, or that a config file cannot express.
MANAGED = {"self", "policy", "env", "policy_kwargs", "verbose", "seed", "device", "_init_setup_model",
           "tensorboard_log", "action_noise", "replay_buffer_class", "rollout_buffer_class"}  # fmt: skip
#: rl-zoo3's keys that build_kwargs turns into constructor arguments.
ZOO_KEYS = {"noise_type", "noise_std"}
NOISE_TYPES = ("normal", "ornstein-uhlenbeck")
#: Policy constructor arguments the algorithm passes itself.
POLICY_MANAGED = {"self", "observation_space", "action_space", "lr_schedule", "use_sde"}


def available_algorithms() -> dict[str, Any]:
    """Algorithm classes by upper-case name: SB3's, and sb3-contrib's when it is installed."""
    import stable_baselines3

    found = {name: getattr(stable_baselines3, name) for name in SB3_ALGOS}
    try:
        import sb3_contrib
    except ImportError:
        return found
    for name in CONTRIB_ALGOS:
        if hasattr(sb3_contrib, name):
            found[name.upper()] = getattr(sb3_contrib, name)
    return found


def algorithm_class(name: str) -> Any:
    algos = available_algorithms()
    if name.upper() in algos:
        return algos[name.upper()]
    if name.upper() in {a.upper() for a in CONTRIB_ALGOS}:
        raise ConfigError(
            f"agent.algo={name} comes with sb3-contrib, which is not installed: {CONTRIB_INSTALL}"
        )
    hint = did_you_mean(name.upper(), list(algos))
    raise ConfigError(f"Unknown SB3 algorithm agent.algo={name!r}.{hint} Available: {', '.join(algos)}")


def hyperparameter_names(algo: Any) -> list[str]:
    """What `agent.hyperparams` may hold for `algo`: its constructor's arguments, and rl-zoo3's noise keys."""
    names = [n for n in inspect.signature(algo.__init__).parameters if n not in MANAGED]
    if "action_noise" in inspect.signature(algo.__init__).parameters:
        names += sorted(ZOO_KEYS)
    return names


def check_hyperparams(
    algo: Any, hyperparams: Mapping[str, Any], policy: str, policy_kwargs: Mapping[str, Any]
) -> None:
    """Refuse, before anything starts, a hyperparameter or policy argument the algorithm does not take."""
    valid = hyperparameter_names(algo)
    defaults = {name: p.default for name, p in inspect.signature(algo.__init__).parameters.items()}
    for key, value in hyperparams.items():
        if key not in valid:
            # A key the config lacks is set with the + that adds it (`+agent.hyperparams.lr` for `lr`).
            found = closest(key, valid)
            hint = (
                f" Did you mean {'+' * (found[0] not in hyperparams)}agent.hyperparams.{found[0]}?"
                if found
                else ""
            )
            raise ConfigError(
                f"agent.hyperparams.{key} is not a {algo.__name__} hyperparameter.{hint} "
                f"{algo.__name__} takes: {', '.join(valid)}. (An agent=NAME preset sets its own "
                f"algorithm's; agent=sb3 agent.algo={algo.__name__} starts from {algo.__name__}'s defaults.)"
            )
        _check_value(f"agent.hyperparams.{key}", key, value, defaults.get(key))
    _check_together(algo, hyperparams, defaults)
    aliases: dict[str, Any] = dict(algo.policy_aliases)
    if policy != "auto" and policy not in aliases:
        hint = did_you_mean(policy, list(aliases))
        raise ConfigError(
            f"agent.policy={policy!r} is not a {algo.__name__} policy.{hint} "
            f"Choose auto or one of {', '.join(aliases)}"
        )
    classes = [aliases[policy]] if policy != "auto" else list(aliases.values())
    accepted = sorted(
        {n for cls in classes for n in inspect.signature(cls.__init__).parameters} - POLICY_MANAGED
    )
    for key in policy_kwargs:
        if accepted and key not in accepted:
            raise ConfigError(
                f"agent.policy_kwargs.{key} is not an argument of {algo.__name__}'s policies."
                f"{did_you_mean(key, accepted, prefix='agent.policy_kwargs.')} "
                f"They take: {', '.join(accepted)}"
            )
    if isinstance(policy_kwargs.get("activation_fn"), str):
        activation(policy_kwargs["activation_fn"])


def _check_value(name: str, key: str, value: Any, default: Any) -> None:
    """A value of the kind the constructor's default has (a number where it takes a number), in
    its documented range (`ranges`)."""
    if key == "noise_type":
        if value is not None:
            check_choice(name, value, NOISE_TYPES)
        return
    if value is None:
        return
    if key == "train_freq" and isinstance(value, list | tuple):  # [n, unit]: n steps or episodes
        check_range(name, key, value, default)
        return
    try:
        parsed = parse_value(key, value)
    except ValueError:
        raise ConfigError(f"{name}={value!r} is not valid: lin_<x> needs a number, e.g. lin_0.001") from None
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{name}={value!r} is not valid: it is true or false")
        return
    if isinstance(default, int | float) and not callable(parsed):
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or not _integral(value, default):
            kind = "an integer" if isinstance(default, int) else "a number"
            raise ConfigError(f"{name}={value!r} is not valid: it is {kind} (the default is {default!r})")
    check_range(name, key, value, default)


def _check_together(algo: Any, hyperparams: Mapping[str, Any], defaults: Mapping[str, Any]) -> None:
    """What SB3 asserts of two hyperparameters together when it builds the model, after the run started."""
    normalize = hyperparams.get("normalize_advantage", defaults.get("normalize_advantage"))
    if "batch_size" in defaults and normalize is True and hyperparams.get("batch_size") == 1:
        raise ConfigError(
            f"agent.hyperparams.batch_size=1 must be > 1 for {algo.__name__} with "
            "agent.hyperparams.normalize_advantage=true (advantages are normalised over each minibatch)"
        )


def _integral(value: Any, default: Any) -> bool:
    return not isinstance(default, int) or isinstance(value, int) or float(value).is_integer()


def default_policy(space: gym.Space, algo: Any) -> str:
    """The policy `agent.policy=auto` gives `algo` for observations in `space`: SB3's by kind, or the
    algorithm's own of that kind where it names them otherwise (RecurrentPPO's MlpLstmPolicy)."""
    from stable_baselines3.common.preprocessing import is_image_space

    if isinstance(space, gym.spaces.Dict):
        kind = "MultiInput"
    elif is_image_space(space, check_channels=False):
        kind = "Cnn"
    else:
        kind = "Mlp"
    aliases = list(getattr(algo, "policy_aliases", {}) or ())
    if f"{kind}Policy" in aliases or not aliases:
        return f"{kind}Policy"
    return next(
        (a for a in aliases if a.startswith(kind) and not a.startswith("MultiInput")), f"{kind}Policy"
    )


def linear_schedule(start: float) -> Any:
    """rl-zoo3's `lin_<x>`: x at the start of training, 0 at the end."""

    def schedule(progress_remaining: float) -> float:
        return progress_remaining * start

    return schedule


def parse_value(key: str, value: Any) -> Any:
    if isinstance(value, str) and value.startswith("lin_"):
        return linear_schedule(float(value[4:]))
    if key == "train_freq" and isinstance(value, list):
        return (int(value[0]), str(value[1]))
    return value


def build_kwargs(
    hyperparams: dict[str, Any], policy_kwargs: dict[str, Any], action_space: gym.Space
) -> dict[str, Any]:
    """Constructor kwargs from config: schedules, action noise and policy kwargs decoded."""
    kwargs = {k: parse_value(k, v) for k, v in hyperparams.items()}
    noise_type = kwargs.pop("noise_type", None)
    noise_std = float(kwargs.pop("noise_std", 0.1))
    if noise_type is not None:
        kwargs["action_noise"] = action_noise(str(noise_type), noise_std, action_space)
    pk = dict(policy_kwargs)
    if isinstance(pk.get("activation_fn"), str):
        pk["activation_fn"] = activation(pk["activation_fn"])
    if pk:
        kwargs["policy_kwargs"] = pk
    return kwargs


def activation(name: str) -> type[torch.nn.Module]:
    options = {n.lower(): n for n in ("ReLU", "Tanh", "ELU", "GELU", "LeakyReLU", "SiLU", "Sigmoid")}
    key = name.rsplit(".", 1)[-1].lower()
    if key not in options:
        check_choice("agent.policy_kwargs.activation_fn", name, list(options.values()))
    cls: type[torch.nn.Module] = getattr(torch.nn, options[key])
    return cls


def action_noise(kind: str, std: float, space: gym.Space) -> Any:
    """rl-zoo3's noise_type/noise_std, sized to the env's action space."""
    import numpy as np
    from stable_baselines3.common.noise import NormalActionNoise, OrnsteinUhlenbeckActionNoise

    kinds = {"normal": NormalActionNoise, "ornstein-uhlenbeck": OrnsteinUhlenbeckActionNoise}
    if kind not in kinds:
        raise ConfigError(
            f"agent.hyperparams.noise_type={kind!r} is not valid; choose one of {', '.join(kinds)}"
        )
    if not isinstance(space, gym.spaces.Box):
        raise ValueError(f"noise_type={kind!r} needs a continuous (Box) action space, not {space}")
    n = int(np.prod(space.shape))
    return kinds[kind](mean=np.zeros(n), sigma=std * np.ones(n))


def space_mismatch(algo: Any, venv: Any, error: AssertionError) -> str:
    """What to say when SB3 refuses the env's spaces: what the algorithm takes, and what to change."""
    # SB3 keeps the supported spaces on the instance it could not build; its message names them.
    supported = re.findall(r"<class '[\w.]+\.(\w+)'>", str(error))
    if "action spaces" in str(error) and supported:
        takes = " or ".join(supported)
        if isinstance(venv.action_space, gym.spaces.Discrete):
            advice = "an agent for discrete actions (agent=ppo, a2c, dqn or sb3_dqn)"
        else:
            advice = "an agent for this action space (agent=ppo or a2c take most; sac or td3 take Box)"
        example = (
            "env=lunarlander env.continuous=true"
            if "Box" in supported
            else "env=lunarlander env.continuous=false, env=cartpole"
        )
        return (
            f"agent.algo={algo.__name__} trains on {takes} action spaces, and this env's is "
            f"{venv.action_space}: choose {advice}, or an env with {takes} actions ({example})"
        )
    return f"agent.algo={algo.__name__} cannot train on this env: {error}"


def check_spaces(
    algo: Any,
    observation_space: gym.Space[Any],
    action_space: gym.Space[Any],
    policy: str,
    policy_kwargs: dict[str, Any],
) -> None:
    """Refuse, before a run starts, spaces that `algo` does not train on, and a policy (or a value of
    its policy_kwargs) that cannot be built for them: SB3 finds both only as it makes its model, once
    training would start. Here its model is made without networks or buffers, then its policy alone."""
    from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
    from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm

    class SpacesOnly(gym.Env[Any, Any]):
        def __init__(self) -> None:
            self.observation_space, self.action_space = observation_space, action_space

    env = SpacesOnly()
    try:
        model = algo(policy, env, policy_kwargs=policy_kwargs or None, _init_setup_model=False)
    except AssertionError as e:  # SB3 checks spaces with asserts
        raise ConfigError(space_mismatch(algo, env, e)) from None
    except Exception:  # an algorithm that cannot be made so (no such argument): its run says why
        return
    if not isinstance(model, (OnPolicyAlgorithm, OffPolicyAlgorithm)):
        return  # another way of building its policy (ARS): its run says what is wrong
    kwargs = dict(model.policy_kwargs)
    if isinstance(model, OnPolicyAlgorithm):  # as its _setup_model builds it
        kwargs.setdefault("use_sde", model.use_sde)
    try:
        model.policy_class(model.observation_space, model.action_space, lambda _: 1e-4, **kwargs)
    except Exception as e:  # SB3 and torch refuse with asserts, TypeError, ValueError, ...
        what = f"agent.policy={policy}" + (
            f" with agent.policy_kwargs={policy_kwargs}" if policy_kwargs else ""
        )
        spaces = [_short(model.observation_space), _short(model.action_space)]
        # Its reason whole, a space's numpy print (bounds over several lines) written as the message does
        reason = re.sub(r"Box\(\[.*?\], \(.*?\), \w+\)", spaces[0], " ".join(str(e).split()))
        reason = re.split(r"(?<=[.)])\s+(?=[A-Z])", reason, maxsplit=1)[0]  # its first sentence
        raise ConfigError(
            f"{what} cannot be built for this env's observations {spaces[0]} and actions {spaces[1]}: "
            f"{reason or type(e).__name__}{_policy_hint(policy, policy_kwargs)}"
        ) from None


def _policy_hint(policy: str, policy_kwargs: dict[str, Any]) -> str:
    """What the keys a policy is built from take, where one of them is what it refused."""
    arch = policy_kwargs.get("net_arch")
    if arch is not None and not (
        isinstance(arch, list | tuple | dict) and all(isinstance(v, int | list | tuple) for v in (
            arch.values() if isinstance(arch, dict) else arch))
    ):  # fmt: skip
        return " (net_arch is a list of layer sizes, [64, 64], or one per network, {pi: [64], vf: [64]})"
    if policy == "CnnPolicy":
        return " (CnnPolicy reads images: MlpPolicy reads vectors, and agent.policy=auto chooses)"
    return ""


def _short(space: gym.Space[Any]) -> str:
    """A space as a message names it: a Box by its shape and dtype, not its every bound."""
    if isinstance(space, gym.spaces.Box):
        return f"Box(shape={space.shape}, {space.dtype})"
    return str(space)
