"""A game's rules as C kernels called from compiled search code, by address.

The game's rules come in as C kernels (`apply_move`, `encode`, `winning_move`, and `forced_win`
where the game has one: numba cfuncs over pointers to the board, the game's `params` and the
planes): the search knows no game. The search
takes their addresses (`GameKernels`) and calls them through a pointer: a function object as an
argument costs numba ~10 µs to convert on every call, an address nothing, and the compiled kernels
stay in numba's disk cache.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any, NamedTuple

import numba as nb
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

from framework_plugins.boardgames import SolvingGame


class GameKernels(NamedTuple):
    """Where a game's rules are: its C kernels' addresses and the numbers they read."""

    apply_move: int
    """`apply_move(board*, action, player, n_moves, params*) -> outcome` (ONGOING, WIN, DRAW)."""
    winning_move: int
    """`winning_move(board*, player, params*) -> action or -1`."""
    encode: int
    """`encode(board*, player, last_move, params*, out*)`: the network's planes of a position."""
    forced_win: int
    """`forced_win(board*, player, params*) -> action or -1`: the first move of a win the opponent
    cannot stop (Gomoku's continuous fours); 0 where the game has no such kernel."""
    params: np.ndarray
    """The game's own numbers (board size, stones in a row, rule), as its kernels read them."""


def game_kernels(game: Any) -> GameKernels:
    """A game's kernels (numba cfuncs, or ctypes function pointers of the same signatures)."""
    return GameKernels(
        _address(game.apply_move),
        _address(game.winning_move),
        _address(game.encode),
        _address(game.forced_win) if isinstance(game, SolvingGame) else 0,
        game.params,
    )


def _address(kernel: Any) -> int:
    address = getattr(kernel, "address", None)
    if address is None:
        try:
            address = ctypes.cast(kernel, ctypes.c_void_p).value
        except ctypes.ArgumentError:
            address = None
    if not address:
        raise TypeError(f"{kernel!r} is not a C function (a numba cfunc or a ctypes function pointer)")
    return int(address)


def entry_point(dispatcher: Any, *args: Any) -> Callable[..., Any]:
    """The compiled function of a numba kernel for these arguments' types, to be called directly.

    A dispatcher types its arguments on every call (~6 µs for a tuple of arrays); the search calls
    its kernels once per simulation, so it resolves them once.
    """
    return dispatcher.compile(tuple(nb.typeof(arg) for arg in args))


def _data(context: Any, builder: Any, array_type: Any, array: Any) -> Any:
    return context.make_array(array_type)(context, builder, array).data


def _call(builder: Any, address: Any, pointers: list[Any], words: list[Any], order: str) -> Any:
    """Call the C function at `address` with arguments in `order` (p: the next pointer, w: the next word)."""
    word = ir.IntType(64)
    ps, ws = iter(pointers), iter(words)
    args = [next(ps) if kind == "p" else next(ws) for kind in order]
    fnty = ir.FunctionType(
        word, [a.type if kind == "p" else word for a, kind in zip(args, order, strict=True)]
    )
    return builder.call(builder.inttoptr(address, fnty.as_pointer()), args)


def _call_apply_move(typingctx, address, board, action, player, n_moves, params):  # type: ignore[no-untyped-def]
    i64 = types.int64

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        board_p = _data(context, builder, signature.args[1], args[1])
        params_p = _data(context, builder, signature.args[5], args[5])
        return _call(builder, args[0], [board_p, params_p], [args[2], args[3], args[4]], "pwwwp")

    return i64(i64, board, i64, i64, i64, params), codegen


def _call_winning_move(typingctx, address, board, player, params):  # type: ignore[no-untyped-def]
    i64 = types.int64

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        board_p = _data(context, builder, signature.args[1], args[1])
        params_p = _data(context, builder, signature.args[3], args[3])
        return _call(builder, args[0], [board_p, params_p], [args[2]], "pwp")

    return i64(i64, board, i64, params), codegen


def _call_encode(typingctx, address, board, player, last, params, out):  # type: ignore[no-untyped-def]
    i64 = types.int64

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        board_p = _data(context, builder, signature.args[1], args[1])
        params_p = _data(context, builder, signature.args[4], args[4])
        out_p = _data(context, builder, signature.args[5], args[5])
        return _call(builder, args[0], [board_p, params_p, out_p], [args[2], args[3]], "pwwpp")

    return i64(i64, board, i64, i64, params, out), codegen


call_apply_move: Any = intrinsic(_call_apply_move)
call_winning_move: Any = intrinsic(_call_winning_move)
#: `forced_win` has `winning_move`'s signature.
call_forced_win: Any = call_winning_move
call_encode: Any = intrinsic(_call_encode)
