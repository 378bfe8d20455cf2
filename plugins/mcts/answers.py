"""The evaluations a search gets back for its leaves, checked in one place: each answer holds as
many policies, values (and draw probabilities) as the positions it answers, policies over the
game's actions, as float32; several answers are gathered into one batch for the tree kernels."""

from __future__ import annotations

import numpy as np

from .batching import Evaluated


def checked(answer: Evaluated, n_actions: int | None) -> Evaluated:
    """The answer with int64 slots and C-contiguous float32 arrays, draws included (zeros where the
    network has none); one of another size, or with policies not over `n_actions` actions (None:
    any), is a RuntimeError that says which."""
    n, logits, values = len(answer.mapping), answer.logits, answer.values
    if len(logits) != n or len(values) != n:
        said = f"{len(logits)} policies and {len(values)} values for {n} positions"
        raise RuntimeError(f"the evaluator returned {said}")
    if answer.draws is not None and np.shape(answer.draws) != (n,):
        raise RuntimeError(f"the evaluator returned {len(answer.draws)} draw probabilities for {n} positions")
    if (
        np.ndim(values) != 1
        or np.ndim(logits) != 2
        or (n_actions is not None and logits.shape[1] != n_actions)
    ):
        wanted = f"[batch, {n_actions}]" if n_actions is not None else "[batch, actions]"
        raise RuntimeError(
            f"the evaluator returned policies of shape {tuple(np.shape(logits))} and values of shape "
            f"{tuple(np.shape(values))}; this game's are {wanted} (flat action indices) and [batch]"
        )
    return answer._replace(
        mapping=answer.mapping.astype(np.int64, copy=False),
        logits=np.ascontiguousarray(logits, dtype=np.float32),
        values=np.ascontiguousarray(values, dtype=np.float32),
        draws=np.zeros(n, dtype=np.float32)
        if answer.draws is None
        else np.ascontiguousarray(answer.draws, dtype=np.float32),
    )


class Gathered:
    """Answers as one (slots, logits, values, draws) for a game of `n_actions` actions."""

    def __init__(self, n_actions: int) -> None:
        self.n_actions = n_actions
        self.none = (
            np.zeros(0, dtype=np.int64),
            np.zeros((0, n_actions), dtype=np.float32),
            np.zeros(0, dtype=np.float32),
            np.zeros(0, dtype=np.float32),
        )
        """No answer: what the first turn of a search finishes."""
        self._zeros = np.zeros(0, dtype=np.float32)

    def __call__(self, answers: list[Evaluated]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The answers checked and joined; a bad one is a RuntimeError (see `checked`)."""
        if not answers:
            return self.none
        if len(answers) == 1:  # the common case, kept short: a search calls it once per turn
            only = answers[0]
            n, logits, values, draws = len(only.mapping), only.logits, only.values, only.draws
            if (
                logits.shape == (n, self.n_actions)
                and values.shape == (n,)
                and logits.dtype == values.dtype == np.float32
                and logits.flags.c_contiguous
                and values.flags.c_contiguous
                and only.mapping.dtype == np.int64
                and (draws is None or (draws.shape == (n,) and draws.dtype == np.float32))
            ):
                return only.mapping, logits, values, self._no_draws(n) if draws is None else draws
        good = [checked(answer, self.n_actions) for answer in answers]
        return (  # checked gave each answer its draws (zeros from a network without them)
            np.concatenate([a.mapping for a in good]),
            np.concatenate([a.logits for a in good]),
            np.concatenate([a.values for a in good]),
            np.concatenate([a.draws for a in good]),
        )

    def _no_draws(self, n: int) -> np.ndarray:
        """Zeros [n]: the draw probabilities of a network without them (kept, not made each turn)."""
        if self._zeros.size < n:
            self._zeros = np.zeros(max(n, 2 * self._zeros.size), dtype=np.float32)
        return self._zeros[:n]
