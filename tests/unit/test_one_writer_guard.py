"""The one-writer rule at run time (``tests/one_writer_support.py``): the transports of every
test session refuse a PATCH that product code sends other than through ``kube/patches.py``,
however it is spelled, and let through the writer's and the tests' own.

The PATCHes are planted as code compiled under a product module's file name, which is all
the guard knows a module by: the five kinds ``test_one_writer.py`` plants for its search of
the source, each sent here and refused before it leaves the client."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from kube_nudge.kube.aiotransport import AiohttpTransport
from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.credentials import Credentials
from kube_nudge.kube.patches import Patch, send
from kube_nudge_dev.admin import AdminClient
from tests.one_writer_support import PRODUCT, PatchRefused, refusals
from tests.unit.httpx_support import HttpxTransport

PATH = "/apis/apps/v1/namespaces/a/deployments/web"
POD = "/api/v1/namespaces/a/pods/web-1"
#: A copy of a source kind outside the core group (a registered kind may be one): no workload.
COPY = "/apis/example.com/v1/namespaces/a/settings/web-1a2b"
Nudge = Callable[[KubeClient, str], Coroutine[Any, Any, Any]]

#: A product module that is not the writer; and the client, where a removed verb lived.
ELSEWHERE = PRODUCT / "strategies" / "planted.py"
CLIENT = PRODUCT / "kube" / "client.py"

#: Each kind of PATCH, planted in a product module as ``nudge(client, path)``.
PLANTED = {
    "positional": """
async def nudge(client, path):
    await client.request("PATCH", path, body={"metadata": {}})
""",
    "keyword": """
async def nudge(client, path):
    await client.request(method="PATCH", path=path, body={"metadata": {}})
""",
    "verb in a variable": """
VERB = "PATCH"

async def nudge(client, path):
    await client.request(VERB, path, body={"metadata": {}})
""",
    "server-side apply": """
async def nudge(client, path):
    await client.apply(path, {"metadata": {}}, field_manager="kube-nudge")
""",
    "through the transport": """
async def nudge(client, path):
    await client.http.request("PATCH", path, None, b"{}", {})
""",
    "a bare request as a task of its own": """
import asyncio

async def nudge(client, path):
    await asyncio.create_task(client.request("PATCH", path, body={"metadata": {}}))
""",
}
#: ``KubeClient.apply`` as it was (server-side apply), to plant back where it lived.
APPLY = """
async def apply(self, path, body, *, field_manager, force=True):
    params = {"fieldManager": field_manager, "force": "true" if force else "false"}
    return await self.request("PATCH", path, params=params, body=body,
                              content_type="application/apply-patch+yaml")
"""


def planted(source: str, file: Path, name: str) -> Any:
    """``name`` from ``source`` run as the module at ``file`` (its frames carry that name)."""
    scope: dict[str, Any] = {}
    exec(compile(source, str(file), "exec"), scope)  # noqa: S102 # the test's own planted code
    return scope[name]


@pytest.fixture
async def api() -> AsyncIterator[tuple[KubeClient, list[str]]]:
    """The real client over a mock API server, and the methods that server received."""
    received: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        received.append(request.method)
        return httpx.Response(200, json={"metadata": {"name": "web"}})

    http = httpx.AsyncClient(transport=httpx.MockTransport(answer), base_url="https://api")
    client = KubeClient(HttpxTransport(http))
    yield client, received
    await client.aclose()


@pytest.mark.parametrize("kind", list(PLANTED))
async def test_a_patch_planted_in_the_product_is_refused(
    kind: str, api: tuple[KubeClient, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, received = api
    monkeypatch.setattr(KubeClient, "apply", planted(APPLY, CLIENT, "apply"), raising=False)
    nudge: Nudge = planted(PLANTED[kind], ELSEWHERE, "nudge")
    with refusals() as refused, pytest.raises(PatchRefused):
        await nudge(client, PATH)
    assert received == []
    [message] = refused
    assert message.startswith(f"PATCH {PATH} sent ")
    if "task" not in kind:  # named by the line that sent it (the last)
        assert f"from strategies/planted.py:{len(PLANTED[kind].splitlines())} (nudge)" in message


async def test_the_products_transport_refuses_too() -> None:
    """aiohttp's, refused before it connects anywhere (nothing listens at the address)."""
    transport = AiohttpTransport(
        "https://127.0.0.1:9", ssl.create_default_context(), Credentials(None),
        user_agent="kube-nudge/test", timeout=1.0,
    )  # fmt: skip
    client = KubeClient(transport)
    nudge: Nudge = planted(PLANTED["positional"], ELSEWHERE, "nudge")
    try:
        with refusals() as refused, pytest.raises(PatchRefused):
            await nudge(client, PATH)
    finally:
        await client.aclose()
    assert len(refused) == 1


async def test_the_writer_and_the_tests_own_patches_go_through(
    api: tuple[KubeClient, list[str]],
) -> None:
    """``patches.send``, awaited or as a task of its own (of a pod: a workload's is the
    workload writer's, below), and the tests' edits (the admin client's ``merge_patch``, as
    a task too; a bare request)."""
    client, received = api
    admin = AdminClient(client.http)
    with refusals() as refused:
        await send(client, Patch(PATH, {"metadata": {}}))
        await asyncio.create_task(send(client, Patch(POD, {"metadata": {}})))
        await admin.merge_patch(PATH, {"metadata": {}})
        await asyncio.create_task(admin.merge_patch(PATH, {"metadata": {}}))
        await client.request("PATCH", PATH, body={"metadata": {}})
    assert (refused, received) == ([], ["PATCH"] * 5)


async def test_the_writer_is_told_by_its_file_not_its_name(
    api: tuple[KubeClient, list[str]],
) -> None:
    """A function named ``send`` elsewhere in the product is no writer."""
    client, received = api
    impostor = "async def send(client, path):\n    await client.request('PATCH', path)\n"
    send_elsewhere: Nudge = planted(impostor, ELSEWHERE, "send")
    with refusals() as refused, pytest.raises(PatchRefused):
        await send_elsewhere(client, PATH)
    assert (len(refused), received) == (1, [])


#: ``patches.send`` of ``path``, as a product module would call it.
SEND = """
from kube_nudge.kube.patches import Patch, send

async def nudge(client, path):
    await send(client, Patch(path, {"metadata": {}}))
"""
WORKLOAD_WRITER = PRODUCT / "controller" / "writer.py"


async def test_a_workload_patch_sent_other_than_by_the_workload_writer_is_refused(
    api: tuple[KubeClient, list[str]],
) -> None:
    """One PATCH per pass holds because one writer sends workload PATCHes: ``send`` called
    for a workload from any other product module (a strategy, the follower, the gate), or
    as a task of its own, is refused; a pod's or a copy's PATCH from there goes through."""
    client, received = api
    elsewhere: Nudge = planted(SEND, ELSEWHERE, "nudge")
    with refusals() as refused, pytest.raises(PatchRefused):
        await elsewhere(client, PATH)
    [message] = refused
    assert "a workload PATCH sent from strategies/planted.py:5 (nudge)" in message
    with refusals() as refused, pytest.raises(PatchRefused):
        await asyncio.create_task(send(client, Patch(PATH, {"metadata": {}})))
    assert len(refused) == 1 and "a task of its own" in refused[0]
    with refusals() as refused:
        await elsewhere(client, POD)
        await elsewhere(client, COPY)
        await planted(SEND, WORKLOAD_WRITER, "nudge")(client, PATH)
    assert (refused, received) == ([], ["PATCH"] * 3)
