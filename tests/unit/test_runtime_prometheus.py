"""What a Prometheus answer measures, and which servers may be asked (the allow-list of
--prometheus-url). The queries themselves run against the real Prometheus in
tests/integration/test_analysis.py."""

from __future__ import annotations

import asyncio
import json
import math
import time
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from kube_nudge.runtime.prometheus import (
    PrometheusAccess,
    PrometheusClient,
    QueryError,
    ServerCredentials,
    _value,
    normalised,
    shown_address,
)
from tests.webhook_receiver import Answer, Server

ADDRESS = "http://prometheus.monitoring:9090"


def answer(kind: str, result: object, status: str = "success") -> bytes:
    return json.dumps({"status": status, "data": {"resultType": kind, "result": result}}).encode()


def test_a_vector_gives_its_values_and_a_scalar_its_number() -> None:
    vector = [{"metric": {"a": "1"}, "value": [1.5, "0.01"]},
              {"metric": {"a": "2"}, "value": [1.5, "NaN"]}]  # fmt: skip
    values = _value(ADDRESS, 200, answer("vector", vector))
    assert isinstance(values, list) and values[0] == 0.01 and math.isnan(values[1])
    assert _value(ADDRESS, 200, answer("vector", [])) == []  # no data: the conditions decide
    assert _value(ADDRESS, 200, answer("scalar", [1.5, "+Inf"])) == math.inf


@pytest.mark.parametrize(
    ("status", "body", "says"),
    [
        (200, answer("matrix", []), "a matrix result; an analysis query must give an instant"),
        (400, json.dumps({"status": "error", "error": "parse error at char 3"}).encode(),
         "the query failed: parse error at char 3"),
        (502, b"<html>bad gateway</html>", "answered 502, not Prometheus JSON"),
        (200, answer("vector", [{"value": [1, "many"]}]), "a sample that is not a number"),
    ],
)  # fmt: skip
def test_an_answer_without_a_value_is_an_error_naming_the_server(
    status: int, body: bytes, says: str
) -> None:
    with pytest.raises(QueryError) as caught:
        _value(ADDRESS, status, body)
    assert str(caught.value).startswith(f"{ADDRESS}: ") and says in str(caught.value)


def test_only_the_allowed_servers_may_be_asked() -> None:
    access = PrometheusAccess((normalised("HTTP://Prometheus.Monitoring:9090/"),))
    assert access.allowed == (ADDRESS,)
    assert access.allows("http://prometheus.monitoring:9090")
    assert access.allows("http://PROMETHEUS.monitoring:9090/")
    for other in (
        "http://169.254.169.254/latest",
        "https://prometheus.monitoring:9090",
        "file:///etc/passwd",
        "nonsense",
    ):
        assert not access.allows(other), other  # fmt: skip


@pytest.mark.parametrize(
    ("address", "says"),
    [
        ("http://prometheus.monitoring:9090@evil.example/",
         "http://***@evil.example/ carries userinfo (user@host)"),
        ("http://user:pw@prometheus.monitoring:9090",
         "http://***@prometheus.monitoring:9090 carries userinfo"),
        ("http://prometheus.monitoring:9091",
         "http://prometheus.monitoring:9091 is not a --prometheus-url of kube-nudge run (it is "
         "none of the allowed ones)"),
        ("http://prometheus.monitoring",
         "http://prometheus.monitoring is not a --prometheus-url of kube-nudge run (it is none"),
        ("http://prometheus.monitoring:9090/api/v1/admin",
         "http://prometheus.monitoring:9090/api/v1/admin is not a --prometheus-url of kube-nudge "
         "run (its path differs from the allowed ones)"),
        ("http://prometheus.monitoring:9090/?query=up",
         "http://prometheus.monitoring:9090/?query=up has a query or fragment"),
        ("http://prometheus.monitoring:9090#x", "has a query or fragment"),
        ("http://prometheus.monitoring:99999", "the port is no number 1-65535"),
    ],
)  # fmt: skip
def test_each_way_of_naming_another_address_is_refused_with_its_reason(
    address: str, says: str
) -> None:
    """Userinfo, another port (the scheme's default included), a longer path, a query:
    each refused, named in the message without any password it carried."""
    access = PrometheusAccess((ADDRESS,))
    refusal = access.refusal(address)
    assert refusal is not None and says in refusal
    assert "pw" not in refusal


def test_localhost_is_not_127_0_0_1_nothing_is_resolved() -> None:
    access = PrometheusAccess((normalised("http://127.0.0.1:9090"),))
    assert access.allows("http://127.0.0.1:9090/")
    assert access.refusal("http://localhost:9090") == (
        "http://localhost:9090 is not a --prometheus-url of kube-nudge run (it is none of the "
        "allowed ones)"
    )


def test_the_schemes_default_port_is_the_same_server() -> None:
    access = PrometheusAccess((normalised("https://thanos.example/prom/"),))
    assert access.allowed == ("https://thanos.example:443/prom",)
    assert access.allows("https://thanos.example:443/prom")
    assert access.allows("HTTPS://Thanos.Example/prom/")
    assert not access.allows("https://thanos.example/prom/api")
    assert not access.allows("https://thanos.example/")
    assert not access.allows("http://thanos.example:443/prom")


def test_an_ipv6_literal_keeps_its_brackets() -> None:
    assert normalised("http://[::1]:9090/") == "http://[::1]:9090"
    assert normalised("https://[FD00::A]") == "https://[fd00::a]:443"
    access = PrometheusAccess((normalised("http://[::1]:9090"),))
    assert access.allows("http://[::1]:9090")
    assert not access.allows("http://[::2]:9090")


@pytest.mark.parametrize(
    "url", ["ftp://x", "http://", "http://x/?q=1", "http://u:p@x", "prometheus:9090",
            "http://x:port"]
)  # fmt: skip
def test_a_flag_value_that_is_no_plain_http_url_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match=r"URL|port"):
        normalised(url)


async def test_an_address_not_allowed_is_refused_before_any_connection() -> None:
    client = PrometheusClient(PrometheusAccess((ADDRESS,)))
    with pytest.raises(QueryError, match="is not a --prometheus-url"):
        await client.query("http://169.254.169.254", "up")
    assert client._session is None  # no connection was ever made


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_a_redirect_is_an_error_and_the_other_server_gets_nothing(status: int) -> None:
    """An allowed server that answers with a redirect can't send the query (nor a 307's
    re-POST, nor its token) anywhere else."""
    allowed, elsewhere = Server(), Server()
    await allowed.start()
    await elsewhere.start()
    target = f"http://127.0.0.1:{elsewhere.port}/api/v1/query"
    allowed.scripts["api"] = [Answer(status, {"Location": target})]
    client = PrometheusClient(PrometheusAccess((normalised(f"http://127.0.0.1:{allowed.port}"),)))
    try:
        with pytest.raises(QueryError) as caught:
            await client.query(f"http://127.0.0.1:{allowed.port}", "up")
        assert str(caught.value) == (
            f"http://127.0.0.1:{allowed.port}: answered {status}, a redirect to {target}; "
            "redirects are never followed (give the server's own URL as --prometheus-url)"
        )
        assert len(allowed.hits["api"]) == 1
        assert dict(elsewhere.hits) == {}
    finally:
        await client.aclose()
        await allowed.close()
        await elsewhere.close()


def _mount(folder: Path, files: dict[str, str]) -> None:
    """Write ``files`` as kubelet updates a mounted Secret: a new timestamped folder, then
    the ``..data`` symlink swapped to it, each key a symlink through ``..data``."""
    version = folder / f"..{time.time_ns()}"
    version.mkdir()
    for name, text in files.items():
        (version / name).write_text(text)
    swap = folder / "..data_tmp"
    swap.symlink_to(version.name)
    swap.replace(folder / "..data")
    for name in files:
        if not (folder / name).is_symlink():
            (folder / name).symlink_to(f"..data/{name}")


async def test_each_server_gets_its_own_token_and_a_rotated_one_without_a_restart(
    tmp_path: Path,
) -> None:
    one, two = Server(), Server()
    await one.start()
    await two.start()
    url_one, url_two = (f"http://127.0.0.1:{s.port}" for s in (one, two))
    folder_one, folder_two = tmp_path / "one", tmp_path / "two"
    folder_one.mkdir()
    folder_two.mkdir()
    _mount(folder_one, {"token": "tok-one-a\n"})
    _mount(folder_two, {"token": "tok-two"})
    access = PrometheusAccess(
        (normalised(url_one), normalised(url_two)),
        credentials={normalised(url_one): ServerCredentials(folder_one),
                     normalised(url_two): ServerCredentials(folder_two)},
    )  # fmt: skip
    client = PrometheusClient(access)
    try:
        for url in (url_one, url_two):
            with pytest.raises(QueryError, match="not Prometheus JSON"):  # the server says "ok"
                await client.query(url, "up")
        _mount(folder_one, {"token": "tok-one-b"})  # rotated
        with pytest.raises(QueryError):
            await client.query(url_one, "up")
        sent = {name: [hit.headers.get("authorization") for hit in server.hits["api"]]
                for name, server in (("one", one), ("two", two))}  # fmt: skip
        assert sent == {
            "one": ["Bearer tok-one-a", "Bearer tok-one-b"],
            "two": ["Bearer tok-two"],
        }
    finally:
        await client.aclose()
        await one.close()
        await two.close()


async def test_a_server_without_credentials_gets_no_token(tmp_path: Path) -> None:
    one, two = Server(), Server()
    await one.start()
    await two.start()
    url_one, url_two = (f"http://127.0.0.1:{s.port}" for s in (one, two))
    _mount(tmp_path, {"token": "only-for-one"})
    access = PrometheusAccess(
        (normalised(url_one), normalised(url_two)),
        credentials={normalised(url_one): ServerCredentials(tmp_path)},
    )
    client = PrometheusClient(access)
    try:
        with pytest.raises(QueryError):
            await client.query(url_two, "up")
        assert [hit.headers.get("authorization") for hit in two.hits["api"]] == [None]
        assert access.cleartext_tokens() == [normalised(url_one)]
    finally:
        await client.aclose()
        await one.close()
        await two.close()


async def test_an_ipv6_server_is_asked_at_its_bracketed_address() -> None:
    """--prometheus-url http://[::1]:PORT once lost its brackets: the query went nowhere."""

    async def query(request: web.Request) -> web.Response:
        return web.Response(body=answer("scalar", [1.5, "42"]), content_type="application/json")

    app = web.Application()
    app.router.add_post("/api/v1/query", query)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "::1", 0)
    await site.start()
    port = runner.addresses[0][1]
    address = f"http://[::1]:{port}"
    client = PrometheusClient(PrometheusAccess((normalised(address),)))
    try:
        assert await client.query(address, "up") == 42.0
    finally:
        await client.aclose()
        await runner.cleanup()


async def _serving(handler: Any, host: str = "127.0.0.1") -> tuple[web.AppRunner, str]:
    app = web.Application()
    app.router.add_post("/api/v1/query", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, 0).start()
    return runner, f"http://{host}:{runner.addresses[0][1]}"


async def test_an_answer_that_arrives_in_pieces_is_read_whole() -> None:
    """A read returns what has arrived so far: an answer in two pieces (a big vector, a
    slow proxy) once was 'not Prometheus JSON'."""
    body = answer("vector", [{"metric": {}, "value": [1, str(n)]} for n in range(2000)])

    async def in_pieces(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        await response.write(body[:100])
        await asyncio.sleep(0.05)  # the second piece comes later, as over a slow network
        await response.write(body[100:])
        await response.write_eof()
        return response

    runner, address = await _serving(in_pieces)
    client = PrometheusClient(PrometheusAccess((normalised(address),)))
    try:
        values = await client.query(address, "up")
        assert values == [float(n) for n in range(2000)]
    finally:
        await client.aclose()
        await runner.cleanup()


async def test_an_answer_over_four_mib_is_an_error_that_says_so() -> None:
    async def huge(request: web.Request) -> web.Response:
        return web.Response(body=b"[" + b"1," * (3 * 1024 * 1024) + b"1]")

    runner, address = await _serving(huge)
    client = PrometheusClient(PrometheusAccess((normalised(address),)))
    try:
        with pytest.raises(QueryError, match="an answer of more than 4 MiB"):
            await client.query(address, "up")
    finally:
        await client.aclose()
        await runner.cleanup()


@pytest.mark.parametrize(
    ("files", "says"),
    [
        ({"token": b"\xff\xfe-not-utf-8"}, "can't be used (UnicodeDecodeError)"),
        ({"token": b"two\nlines"}, "can't be used (the token holds a line break"),
        ({"ca.crt": b"-----BEGIN CERTIFICATE-----\ngarbage\n"}, "can't be used ("),
    ],
)  # fmt: skip
async def test_credentials_that_cant_be_used_are_the_measurements_error(
    tmp_path: Path, files: dict[str, bytes], says: str
) -> None:
    """A bad token or CA bundle (as kubelet may mount it, later) is an Error of that query,
    counted as any other, never an exception that stalls the analysis."""
    server = Server()
    await server.start()
    address = f"http://127.0.0.1:{server.port}"
    for name, content in files.items():
        (tmp_path / name).write_bytes(content)
    access = PrometheusAccess(
        (normalised(address),), credentials={normalised(address): ServerCredentials(tmp_path)}
    )
    client = PrometheusClient(access)
    try:
        with pytest.raises(QueryError) as caught:
            await client.query(address, "up")
        assert says in str(caught.value) and str(tmp_path) in str(caught.value)
        assert "two" not in str(caught.value) and "not-utf-8" not in str(caught.value)
        assert dict(server.hits) == {}
    finally:
        await client.aclose()
        await server.close()


def test_a_token_folder_that_is_a_directory_is_an_error_too(tmp_path: Path) -> None:
    (tmp_path / "token").mkdir()
    with pytest.raises(OSError):
        ServerCredentials(tmp_path).check()


@pytest.mark.parametrize(
    "address",
    ["http://127.0.\n0.1:9090", "http://127.0.0.1:90\t90", "http://127.0.0.1:9090/ x",
     "http://127.0.0.1:0", "http://127.0.0.1:9090\x00"],
)  # fmt: skip
def test_an_address_with_a_space_a_control_character_or_port_0_is_refused(address: str) -> None:
    """urlsplit drops tabs and line breaks: the address read would not be the one written."""
    access = PrometheusAccess((normalised("http://127.0.0.1:9090"),))
    refusal = access.refusal(address)
    assert refusal is not None and refusal.isprintable() and len(refusal) < 300
    with pytest.raises(ValueError, match=r"no spaces or control characters|port is no number"):
        normalised(address)


def test_a_long_or_unprintable_address_is_shown_bounded_and_escaped() -> None:
    shown = shown_address("http://u:pw@evil/\x1b[31m\x07\udcff" + "a" * 500)
    assert shown.startswith("http://***@evil/\\x1b[31m\\x07\\udcff") and len(shown) == 200
    assert shown.isprintable() and "pw" not in shown
