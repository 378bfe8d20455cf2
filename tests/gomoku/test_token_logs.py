"""token_logs.py: a token redacted in every form a log line can quote it, and a client's error in one
line. The fighter's page server and the Gomoku play page both use it (framework_plugins.web)."""

from __future__ import annotations

import importlib
import logging
import secrets
from types import ModuleType

import pytest
from aiohttp.http_exceptions import LineTooLong

from tests.token_leaks import percent_encoded, token_traces

MODULES = ["framework_plugins.web.token_logs"]


@pytest.fixture(params=MODULES)
def token_logs(request: pytest.FixtureRequest) -> ModuleType:
    return importlib.import_module(request.param)


@pytest.fixture
def token() -> str:
    return secrets.token_urlsafe(16)


def test_the_token_whole_cut_or_percent_encoded_is_redacted(token_logs: ModuleType, token: str) -> None:
    forms = [
        token,
        token[:6],  # a request line quoted cut short
        token[:20],
        token[-7:],
        token[5:17],
        percent_encoded(token),
        percent_encoded(token, lower=True),
        percent_encoded(token, every=3),
        percent_encoded(token[:10], every=2),
    ]
    for form in forms:
        text = f"bytearray(b'/api/state?x=aaa&token={form}...') and again ?token={form}"
        redacted = token_logs.redact(text, [token])
        assert redacted == "bytearray(b'/api/state?x=aaa&token=<token>...') and again ?token=<token>", form
    split = f"{token[:11]}\x00{token[11:]}"  # a token split by a character it has not
    assert token_logs.redact(split, [token]) == "<token>\x00<token>"


def test_text_without_a_run_of_six_of_the_tokens_characters_is_left_as_it_is(
    token_logs: ModuleType, token: str
) -> None:
    texts = [
        "Error handling request from 127.0.0.1: LineTooLong, status 400 (100% of it)",
        f"{token[:5]} {token[5:10]} {token[10:15]}",  # five at most in a row
        "%zz %4 %",
        "",
    ]
    for text in texts:
        assert token_logs.redact(text, [token]) == text
    assert token_logs.redact(token, []) == token


def test_every_token_guarded_is_redacted(token_logs: ModuleType) -> None:
    tokens = [secrets.token_urlsafe(16) for _ in range(3)]
    text = " ".join(f"?token={t}" for t in reversed(tokens))
    assert token_logs.redact(text, tokens) == "?token=<token> ?token=<token> ?token=<token>"


def test_a_guarded_logger_writes_a_client_error_as_one_line_and_no_token_anywhere(
    token_logs: ModuleType, token: str, caplog: pytest.LogCaptureFixture
) -> None:
    logger = logging.getLogger(f"tests.token_logs.{token_logs.__name__}")
    caplog.set_level(logging.DEBUG)
    token_logs.guard_token(token, logger)
    try:
        error = LineTooLong(f"bytearray(b'/?token={token[:15]}...')", "8190")
        logger.error("Error handling request from %s", "127.0.0.1", exc_info=error)
        try:
            raise RuntimeError(f"a handler's bug quoting ?token={percent_encoded(token)}")
        except RuntimeError:
            logger.exception("Unhandled exception")
        logger.warning(
            "a request header: %s", f"Referer: /?token={token}", extra={"line": f"GET /?token={token}"}
        )
    finally:
        token_logs.release_token(token)
    client, bug, warning = [r for r in caplog.records if r.name == logger.name]
    assert client.getMessage() == (
        "Error handling request from 127.0.0.1: LineTooLong, status 400 (what the client sent is not logged)"
    )
    assert (
        "Traceback" in bug.getMessage()
        and "RuntimeError: a handler's bug quoting ?token=<token>" in bug.getMessage()
    )
    assert not client.exc_info and not bug.exc_info  # nothing left for a handler to format unredacted
    assert warning.getMessage() == "a request header: Referer: /?token=<token>"
    assert warning.line == "GET /?token=<token>"  # type: ignore[attr-defined]
    assert token_traces(caplog.text, token) == []


def test_a_released_token_is_no_longer_redacted(token_logs: ModuleType, token: str) -> None:
    logger = logging.getLogger(f"tests.token_logs.released.{token_logs.__name__}")
    token_logs.guard_token(token, logger)
    token_logs.release_token(token)
    record = logger.makeRecord(logger.name, logging.INFO, __file__, 0, "said %s", (token,), None)
    assert logger.filter(record)
    assert record.getMessage() == f"said {token}"
