"""`python -m framework plugins`: every installed plugin, read without importing any of them."""

from __future__ import annotations

import argparse
import sys

from framework import registry


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m framework plugins", description="List the installed framework plugins."
    )
    parser.add_argument("--kind", choices=list(registry.GROUPS), help="only plugins of this kind")
    args = parser.parse_args(argv)
    rows = [("KIND", "NAME", "DISTRIBUTION", "VERSION", "DESCRIPTION")]
    for kind in registry.GROUPS if args.kind is None else [args.kind]:
        for name, entries in registry.discover(kind).items():
            for p in entries:
                rows.append((kind, name, p.distribution, p.version, p.description()))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row[:4], widths, strict=True)) + "  " + row[4])
    problems = registry.conflicts()
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    return 1 if problems else 0
