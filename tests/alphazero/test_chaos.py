"""Chaos: self-play workers, inference actors and the weights keeper killed (SIGKILL) during a real
run (`python -m framework ... search=ray_async`), alone and together, and killed past
search.max_restarts.

A run whose actors die within their restarts must finish; every death must be counted once, in its
metric and in one log line, whichever actor died and in whatever order; and no position may be
evaluated with weights older than the run last published. That last is checked on the versions
themselves, read from the actors after each kill: a restarted keeper answers with a version no
older than the one it held before its death, and so does a restarted inference actor, before it
answers anything. (The run checks every answer too: a batch answered with a version older than its
search began with fails it.) Past max_restarts, the run ends FAILED in one line, with no "Unhandled
error" of Ray's (a call's error nobody retrieved) and no traceback."""

from __future__ import annotations

import os
import random
import re
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient

from tests.alphazero.test_cli import SHORT

pytestmark = pytest.mark.slow

#: Each kind of actor, by the start of its Ray name (the keeper's is its service's, with "-weights").
PREFIXES = {
    "worker": "framework-selfplay-",
    "inference": "framework-inference-",
    "keeper": "framework-inference-",
}
KEEPER_SUFFIX = "-weights"
#: What the run says of each kind when one dies.
SAID = {"worker": "self-play worker", "inference": "inference actor", "keeper": "weights keeper"}
METRICS = {
    "worker": "perf/worker_restarts",
    "inference": "perf/inference_restarts",
    "keeper": "perf/weights_keeper_restarts",
}
#: The run of these tests: every training phase publishes new weights (no gating) to two workers.
RUN = [
    *SHORT,
    "agent.gating=false",
    "eval.every_steps=0",
    "checkpoint.every_steps=0",
    "search=ray_async",
    "search.batch_size=8",
    "search.inference_num_cpus=0.5",
    "hydra.run.dir=outputs/run",
]
#: How long one actor may take to be back (a restart imports torch: seconds, more on a loaded machine;
#: beside a busy loop per core, a second test run and an install, one restart took over 90 s).
BACK_S = 150.0


def actors(kind: str) -> list[Any]:
    """The live handles of the actors of `kind` (of the one run these tests start at a time)."""
    import ray

    found = []
    for a in ray.util.list_named_actors(all_namespaces=True):
        name = a["name"]
        if not name.startswith(PREFIXES[kind]) or name.endswith(KEEPER_SUFFIX) != (kind == "keeper"):
            continue
        try:
            found.append(ray.get_actor(name, namespace=a["namespace"]))
        except ValueError:  # gone since it was listed
            continue
    return found


def asked(call: Callable[[], Any], timeout_s: float = BACK_S) -> Any:
    """An actor call's answer, asked again while the actor is restarting."""
    import ray
    from ray import exceptions

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return ray.get(call(), timeout=max(1.0, deadline - time.monotonic()))
        except exceptions.ActorUnavailableError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def back(actor: Any, dead_pid: int) -> dict[str, Any]:
    """`where` of the actor once a process other than `dead_pid` answers it (Ray restarted it)."""
    deadline = time.monotonic() + BACK_S
    while time.monotonic() < deadline:
        where: dict[str, Any] = asked(actor.where.remote, deadline - time.monotonic())
        if where["pid"] != dead_pid:
            return where
        time.sleep(0.1)
    raise AssertionError(f"the actor killed at pid {dead_pid} was not back in {BACK_S:.0f} s")


def best_version(keeper: Any) -> int:
    """The version of the self-play network the keeper holds (it answers once it is seeded)."""
    return int(asked(keeper.versions.remote).get("best", 0))


class Chaos:
    """Kills from a thread beside the run, once self-play plays; what went wrong, to be raised in the test."""

    def __init__(self, log: Path) -> None:
        self.log, self.stop = log, threading.Event()
        self.kills = {"worker": 0, "inference": 0, "keeper": 0}
        self.failures: list[str] = []
        self.done = False
        self._thread: threading.Thread | None = None

    def run(self, script: Callable[[], None]) -> None:
        def guarded() -> None:
            try:
                while not self.playing():
                    if self.stop.wait(0.5):
                        return
                script()
                self.done = True
            except Exception as e:  # the run ended under it, or an actor answered wrong
                self.failures.append(f"{type(e).__name__}: {e}")

        self._thread = threading.Thread(target=guarded, daemon=True)
        self._thread.start()

    def end(self) -> None:
        self.stop.set()
        if self._thread is not None:
            self._thread.join(BACK_S)

    def playing(self) -> bool:
        """Whether self-play has made its first moves (the kills fall during the run, not its start)."""
        try:
            return "self-play: " in self.log.read_text()
        except OSError:
            return False

    def kill(self, kind: str, actor: Any) -> int:
        """SIGKILL `actor` once it answers (so that each kill is one incarnation); its pid."""
        return self.kill_together({kind: actor})[kind]

    def kill_together(self, victims: dict[str, Any]) -> dict[str, int]:
        """SIGKILL each actor, in order, within moments (their pids asked first); their pids."""
        pids = {kind: int(asked(actor.where.remote)["pid"]) for kind, actor in victims.items()}
        for kind, pid in pids.items():
            os.kill(pid, signal.SIGKILL)
            self.kills[kind] += 1
        return pids

    def wait_for_publish(self, keeper: Any, after: int) -> int:
        """The keeper's version once the run published one newer than `after`."""
        deadline = time.monotonic() + 2 * BACK_S
        while time.monotonic() < deadline:
            if self.stop.is_set():
                raise AssertionError(f"the run ended before it published weights newer than version {after}")
            version = best_version(keeper)
            if version > after:
                return version
            self.stop.wait(0.5)
        raise AssertionError(f"no weights newer than version {after} were published in {2 * BACK_S:.0f} s")


def deaths_said(output: str, kind: str) -> int:
    """The deaths of `kind` the run's lines say ("died" once a death, "died N times" when it saw several)."""
    pattern = re.compile(rf"{SAID[kind]} \S+ died(?: (\d+) times)?; Ray restarted it")
    return sum(int(m.group(1) or 1) for m in pattern.finditer(output))


def finished_run(tmp_path: Path, r: Any, chaos: Chaos) -> tuple[MlflowClient, Any]:
    assert not chaos.failures, chaos.failures
    assert r.returncode == 0, r.output[-4000:]
    assert chaos.done, f"the run ended before every kill: {chaos.kills}"
    client, run = the_run(tmp_path)
    assert run.info.status == "FINISHED"
    return client, run


def the_run(tmp_path: Path) -> tuple[MlflowClient, Any]:
    """The one MLflow run of the test's directory."""
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("framework")
    assert experiment is not None, "the run logged nothing"
    (run,) = client.search_runs([experiment.experiment_id])
    return client, run


def assert_each_death_counted_once(run: Any, r: Any, log: Path, kills: dict[str, int]) -> None:
    """The restarts the run counted and said equal the kills, kind by kind; no traceback anywhere."""
    counted = {kind: run.data.metrics[METRICS[kind]] for kind in kills}
    assert counted == kills, f"counted {counted}, killed {kills}"
    said = {kind: deaths_said(log.read_text(), kind) for kind in kills}
    assert said == kills, f"said {said}, killed {kills}"
    # The run's output (with the workers' lines Ray forwards) says each death once, too.
    assert {kind: deaths_said(r.output, kind) for kind in kills} == kills
    for text in ("Traceback", "StaleWeights", "Unhandled error"):
        assert text not in r.output, r.output[-4000:]


#: The scenes of the chaos run, in order: each kills these actors within moments of each other.
SCENES = [
    ["worker"],
    ["keeper"],  # the keeper alone
    ["inference"],
    ["keeper", "inference"],  # the keeper, then the inference actor before the keeper is back
    ["keeper", "worker"],  # the keeper with a worker
]


def test_a_run_whose_actors_are_killed_alone_and_together_finishes_counting_each_death_once(
    cli: Any, tmp_path: Path, ray_session: Any
) -> None:
    """Each scene falls at a random moment once the run has published since the last; after it,
    the restarted actors are asked for the versions they hold."""
    rng = random.Random(7)
    chaos = Chaos(tmp_path / "outputs/run/framework.log")
    seen: list[tuple[list[str], int, int, int]] = []
    """(scene, the keeper's version before its kills, the keeper's after, the inference actor's after)."""

    def script() -> None:
        version = 0
        for kinds in SCENES:
            (keeper,) = actors("keeper")
            version = chaos.wait_for_publish(keeper, version)
            if chaos.stop.wait(rng.uniform(0.3, 2.0)):
                return
            victims = {kind: rng.choice(actors(kind)) for kind in kinds}
            pids = chaos.kill_together(victims)
            for kind, victim in victims.items():
                back(victim, pids[kind])
            after = [asked(a.where.remote)["versions"].get("best", -1) for a in actors("inference")]
            seen.append((kinds, version, best_version(keeper), min(after)))

    chaos.run(script)
    try:
        r = cli(*RUN, "total_steps=5000", f"ray.address={ray_session.address}", "agent.workers=2",
                "agent.worker_max_restarts=4", "search.max_restarts=4", timeout=540)  # fmt: skip
    finally:
        chaos.end()
    client, run = finished_run(tmp_path, r, chaos)
    assert "self-play: 2 Ray worker(s) on 1 node" in r.output  # (on 2 nodes: test_ray_async_cli.py)
    assert [kinds for kinds, *_ in seen] == SCENES
    for kinds, before, keeper, inference in seen:
        # Nothing holds weights older than the run had published before the kills: a restarted keeper
        # (before it answers) nor a restarted inference actor (before its first batch).
        assert keeper >= before >= 1 and inference >= before, (kinds, before, keeper, inference)
    assert chaos.kills == {"worker": 2, "inference": 2, "keeper": 3}
    assert_each_death_counted_once(run, r, tmp_path / "outputs/run/framework.log", chaos.kills)
    assert run.data.metrics["perf/pending_clamped"] == 0
    versions = client.get_metric_history(run.info.run_id, "selfplay/weights_version")
    assert max(m.value for m in versions) >= len(SCENES)  # new weights were published between the scenes


def test_an_inference_actor_killed_past_max_restarts_fails_the_run_in_one_line(
    cli: Any, tmp_path: Path, ray_session: Any
) -> None:
    chaos = Chaos(tmp_path / "outputs/run/framework.log")

    def script() -> None:
        (actor,) = actors("inference")
        back(actor, chaos.kill("inference", actor))  # restart 1 of 1
        chaos.stop.wait(1.0)
        chaos.kill("inference", actor)  # Ray cannot restart it again

    chaos.run(script)
    try:
        # No training: the workers' searches, not the run's own checks, find the actor dead for good
        # (each worker's calls then fail with the error Ray reported as unhandled when not retrieved).
        r = cli(*RUN, "total_steps=100000", "agent.min_replay=1000000", f"ray.address={ray_session.address}",
                "agent.workers=2", "search.max_restarts=1", timeout=300)  # fmt: skip
    finally:
        chaos.end()
    assert not chaos.failures, chaos.failures
    assert chaos.done and chaos.kills["inference"] == 2
    assert r.returncode != 0
    _, run = the_run(tmp_path)
    assert run.info.status == "FAILED"
    errors = [line for line in r.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, r.stderr[-4000:]
    assert re.match(
        r"Error: inference actor framework-inference-\w+-0 died and Ray cannot restart it: "
        r"its search\.max_restarts=1 are spent \(",
        errors[0],
    ), errors
    for text in ("Unhandled error", "Traceback", "RayTaskError"):
        assert text not in r.output, r.output[-4000:]
