"""Plugins and fixtures of every test session (unit and integration)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kube_nudge.kube.aiotransport import AiohttpTransport
from tests.one_writer_support import guarded, taken

pytest_plugins = ["tests.skips"]


@pytest.fixture(scope="session", autouse=True)
def _one_writer() -> Iterator[None]:
    """The product's transport refuses a PATCH that product code sends other than through
    ``kube/patches.py`` (``tests/one_writer_support.py``)."""
    with guarded(AiohttpTransport):
        yield


@pytest.fixture(autouse=True)
def _no_patch_refused() -> Iterator[None]:
    """A test fails if a PATCH was refused during it and the test did not expect it: the
    product retries a write that raised, so the refusal alone might go unseen."""
    yield
    refused = taken()
    assert not refused, f"the one-writer rule was broken: {refused}"
