"""The example plugin's sub-command, `python -m framework corridor`, registered in the
`framework.commands` entry-point group."""

import argparse

from .corridor import RIGHT, CorridorEnv


def corridor(argv: list[str]) -> int:
    """Walk the corridor to its goal, printing each step as text."""
    parser = argparse.ArgumentParser(
        prog="python -m framework corridor", description="Walk the corridor to its goal, step by step."
    )
    parser.add_argument("--length", type=int, default=8, help="cells in the corridor (at least 2)")
    args = parser.parse_args(argv)
    if args.length < 2:
        parser.error(f"--length {args.length}: a corridor has at least 2 cells")
    env = CorridorEnv(args.length, max_steps=args.length, render_mode="ansi")
    env.reset(seed=0)
    print(env.render())
    steps, done = 0, False
    while not done:
        _, _, terminated, truncated, _ = env.step(RIGHT)
        steps += 1
        done = terminated or truncated
        print(env.render())
    print(f"goal reached in {steps} steps")
    return 0
