"""Log setup: JSON lines with caller extras, text, and idempotence."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from kube_nudge.app.logs import setup_logging

log = logging.getLogger("kube_nudge.test")


@pytest.fixture(autouse=True)
def restore_root_logger() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in root.handlers:
        if handler not in handlers:
            root.removeHandler(handler)
    root.setLevel(level)


def _lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().err.splitlines()


def test_json_lines_carry_extras(capsys: pytest.CaptureFixture[str]) -> None:
    setup_logging("info", "json")
    log.info("rolled %s", "web", extra={"kind": "Deployment", "count": 2, "obj": object()})
    log.debug("hidden at info")
    [line] = _lines(capsys)
    entry = json.loads(line)
    assert entry["msg"] == "rolled web"
    assert entry["level"] == "INFO"
    assert entry["logger"] == "kube_nudge.test"
    assert entry["kind"] == "Deployment"
    assert entry["count"] == 2
    assert "obj" not in entry  # not JSON-serializable: dropped, the line survives
    assert entry["ts"].endswith("+00:00")
    assert set(entry) == {"ts", "level", "logger", "msg", "kind", "count"}


def test_json_exception_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    setup_logging("debug", "json")
    try:
        raise ValueError("bad\nvalue")
    except ValueError:
        log.exception("failed")
    [line] = _lines(capsys)
    entry = json.loads(line)
    assert entry["msg"] == "failed"
    assert entry["level"] == "ERROR"
    assert "ValueError: bad" in entry["exc"]
    assert "Traceback" in entry["exc"]


def test_text_format(capsys: pytest.CaptureFixture[str]) -> None:
    setup_logging("WARNING", "text")
    log.info("quiet")
    log.warning("loud %d", 3)
    [line] = _lines(capsys)
    assert line.endswith("WARNING kube_nudge.test: loud 3")


def test_setup_twice_does_not_duplicate(capsys: pytest.CaptureFixture[str]) -> None:
    setup_logging("info", "text")
    setup_logging("info", "json")
    log.info("once")
    [line] = _lines(capsys)
    assert json.loads(line)["msg"] == "once"


def test_http_request_logs_are_quiet_unless_debugging() -> None:
    setup_logging("info", "json")
    assert not logging.getLogger("httpx2").isEnabledFor(logging.INFO)
    setup_logging("debug", "json")
    assert logging.getLogger("httpx2").isEnabledFor(logging.DEBUG)


@pytest.mark.parametrize(("level", "fmt"), [("loud", "text"), ("info", "xml")])
def test_rejects_unknown_settings(level: str, fmt: str) -> None:
    with pytest.raises(ValueError, match="unknown log"):
        setup_logging(level, fmt)
