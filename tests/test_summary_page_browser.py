"""A sweep's summary page where people open it: in MLflow's artifact preview (a sandboxed frame of a
`blob:` page) served by a real `mlflow server`, seen in a real headless Chromium; and as a
downloaded copy."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from mlflow.tracking import MlflowClient

from framework.contracts import SweepSummarySpec
from framework_plugins.trackers.local_views import stop_server
from framework_plugins.trackers.ui import server_env
from plugins.trackers import local_views
from plugins.trackers.mlflow_session import MlflowSession
from plugins.trackers.summary_page import UI_ADDRESS
from tests.conftest import free_port
from tests.fighter.cdp import InspectedPage

OBJECTIVE = "eval/return_mean"
LR = "agent.lr"


def _sweep(tmp_path: Path) -> tuple[str, str, dict[str, str]]:
    """A real store holding a sweep over lr 0.1 and 0.01 with two seeds each, summarised by the
    tracking session as a sweep's end summarises it: (uri, parent id, child id by name)."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    session = MlflowSession(uri, "framework", flush_every_s=0.0)
    parent = session.start_parent(
        run_name="sweep lr=0.1,0.01 seed=0,1", tags={}, params={}, start_time=time.time()
    )
    client = MlflowClient(tracking_uri=uri)
    children = {}
    for lr in ("0.1", "0.01"):
        for seed in ("0", "1"):
            name = f"lr={lr} seed={seed}"
            run = client.create_run(
                session._experiment_id(), run_name=name, tags={"mlflow.parentRunId": parent}
            )
            client.log_param(run.info.run_id, LR, lr)
            client.log_param(run.info.run_id, "seed", seed)
            for step in range(3):
                client.log_metric(run.info.run_id, OBJECTIVE, float(lr) * 100 * step + int(seed), step=step)
            client.set_terminated(run.info.run_id, "FINISHED")
            children[name] = run.info.run_id
    spec = SweepSummarySpec(swept_keys=(LR, "seed"), objective=OBJECTIVE, mode="max")
    session.end_parent(parent, "FINISHED", dataclasses.asdict(spec), end_time=time.time())
    return uri, parent, children


@contextlib.contextmanager
def _server(uri: str, cwd: Path) -> Any:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri,
         "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
        cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        env=server_env(),
    )  # fmt: skip
    address = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{address}/health", timeout=2):
                break
            assert server.poll() is None and time.monotonic() < deadline, "mlflow ui did not start"
            time.sleep(0.5)
        yield address
    finally:
        # The whole server (mlflow ui starts uvicorn and its job consumers in its session); on a
        # loaded machine it may take long to go, and then goes at once.
        stop_server(server, grace_s=60)


def _targets(page: InspectedPage) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{page.port}/json", timeout=5) as r:
        return list(json.load(r))


def _in_frame(page: InspectedPage, expression: str, timeout: float = 60) -> Any:
    """The value of `expression` in the preview's frame (a DevTools target of its own: its origin is
    opaque), once the frame exists and the value is truthy."""
    deadline = time.monotonic() + timeout
    while True:
        frames = [t for t in _targets(page) if t["type"] == "iframe" and t["url"].startswith("blob:")]
        if frames:
            value = _evaluate(frames[0]["webSocketDebuggerUrl"], expression)
            if value:
                return value
        assert time.monotonic() < deadline, f"{expression}: no preview frame, or falsy, after {timeout} s"
        time.sleep(0.5)


def _evaluate(ws_url: str, expression: str) -> Any:
    async def send() -> Any:
        async with aiohttp.ClientSession() as session, session.ws_connect(ws_url, max_msg_size=0) as ws:
            call = {
                "id": 1,
                "method": "Runtime.evaluate",
                "params": {"expression": expression, "returnByValue": True},
            }
            await ws.send_json(call)
            async for message in ws:
                data = json.loads(message.data)
                if data.get("id") == 1:
                    return data["result"]["result"].get("value")
        return None

    return asyncio.run(asyncio.wait_for(send(), 30))


def _click(page: InspectedPage, x: float, y: float, *, ctrl: bool = False) -> None:
    for kind in ("mousePressed", "mouseReleased"):
        page._command(
            "Input.dispatchMouseEvent",
            {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1, "modifiers": 2 if ctrl else 0},
        )


@pytest.mark.slow
def test_run_links_work_in_mlflows_preview_and_in_a_downloaded_copy(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # the store's artifacts go to ./mlruns
    uri, parent, children = _sweep(tmp_path)
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_run(parent).info.experiment_id
    best = children["lr=0.1 seed=1"]
    with _server(uri, tmp_path) as address:
        page = InspectedPage(
            f"{address}/#/experiments/{experiment}/runs/{parent}/artifacts/sweep_summary.html",
            width=1400,
            height=1000,
        )
        try:
            # Inside the preview, each link opens the run at the server the page is seen from.
            link = "document.querySelector(\"a[data-run*='" + best + "']\")"
            href = _in_frame(page, f"{link} && {link}.href")
            assert href == f"{address}/#/experiments/{experiment}/runs/{best}?workflowType=machine_learning"
            assert "Best: lr=0.1" in _in_frame(page, "document.body.innerText")
            page.screenshot(tmp_path / "preview.png")
            box = page.evaluate("JSON.stringify(document.querySelector('iframe').getBoundingClientRect())")
            frame = json.loads(box)
            inner = json.loads(
                _in_frame(page, f"({link}.scrollIntoView({{block: 'center', inline: 'center'}}), "
                                f"JSON.stringify({link}.getBoundingClientRect()))")
            )  # fmt: skip
            x, y = frame["x"] + inner["x"] + inner["width"] / 2, frame["y"] + inner["y"] + inner["height"] / 2
            # A plain click, which the sandbox blocks: the page says how to open the run instead.
            _click(page, x, y)
            hint = _in_frame(page, "getComputedStyle(document.getElementById('hint')).display !== 'none' && "
                                   "document.getElementById('hint').textContent")  # fmt: skip
            assert "Ctrl+click" in hint and href in hint
            assert next(t for t in _targets(page) if t["type"] == "page")["url"].startswith(address)
            # A Ctrl+click opens the run's page in a new tab.
            _click(page, x, y, ctrl=True)
            deadline = time.monotonic() + 30
            while href not in [t["url"] for t in _targets(page) if t["type"] == "page"]:
                assert time.monotonic() < deadline, _targets(page)
                time.sleep(0.3)
        finally:
            page.close()
    # A downloaded copy opens the runs where `ui` serves this store.
    copy = Path(client.download_artifacts(parent, "sweep_summary.html", str(tmp_path / "dl")))
    page = InspectedPage(copy.as_uri(), width=1400, height=1000)
    try:
        found = page.wait_for(
            "document.querySelector('a[data-run]') && document.querySelector('a[data-run]').href"
        )
        # 5000, or the store's own port where 5000 was held as the sweep started (a test beside it).
        ports = {UI_ADDRESS, f"http://127.0.0.1:{local_views.own_port(local_views.absolute_uri(uri))}"}
        assert found.split("/#/")[0] in ports and f"/#/experiments/{experiment}/runs/" in found, found
        assert page.evaluate("document.images.length") >= 3  # the plots are inside the page
        assert page.evaluate("Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)")
    finally:
        page.close()
