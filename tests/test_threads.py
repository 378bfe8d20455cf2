"""The run's `threads`: every CPU thread it computes on (0: every CPU it may use), and OpenMP's
workers told to spin briefly, since the run's parts take turns on those threads."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from framework import machine
from framework.building import run_threads


def test_zero_threads_is_every_cpu_the_process_may_use() -> None:
    assert run_threads(0) == machine.cpus() >= 1
    assert run_threads(3) == 3


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({}, {"GOMP_SPINCOUNT": "10000"}),
        ({"GOMP_SPINCOUNT": "0"}, {"GOMP_SPINCOUNT": "0"}),
        ({"OMP_WAIT_POLICY": "ACTIVE"}, {"OMP_WAIT_POLICY": "ACTIVE", "GOMP_SPINCOUNT": None}),
    ],
)
def test_openmp_workers_spin_briefly_unless_the_user_said_otherwise(
    given: dict[str, str], expected: dict[str, str | None], monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT"):
        monkeypatch.delenv(key, raising=False)
    for key, value in given.items():
        monkeypatch.setenv(key, value)
    machine.short_openmp_spin()
    for key, value in expected.items():
        assert os.environ.get(key) == value


def test_the_command_line_sets_it_before_torch_is_imported() -> None:
    """`python -m framework` (here: --help, which imports no torch) leaves it set for torch's libgomp."""
    code = (  # said as the process ends (its atexit handlers run; then it exits, framework.__main__)
        "import atexit, os, sys, runpy; sys.argv = ['framework', '--help']\n"
        "atexit.register(lambda: print('spin', os.environ.get('GOMP_SPINCOUNT'), 'torch' in sys.modules))\n"
        "runpy.run_module('framework', run_name='__main__')"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.stdout.strip().splitlines()[-1] == "spin 10000 False", out.stdout[-2000:] + out.stderr[-2000:]
