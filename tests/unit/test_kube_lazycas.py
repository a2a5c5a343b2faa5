"""aiohttp is imported with the CA bundle file hidden (kube/lazycas.py): the premise (with no
bundle file, a default context loads no CA at creation and still verifies against a hashed
CA directory), and when it is done (only where it changes nothing else), each in a child
process."""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import subprocess
import sys
from pathlib import Path

import pytest
from aiohttp import web

from kube_nudge.kube.lazycas import hashed_ca_directory
from tests.tls_support import certificate_pair, tls_server

CLIENT = """
import json, socket, ssl, sys
context = ssl.create_default_context()
loaded = context.cert_store_stats()["x509"]
with socket.create_connection(("localhost", int(sys.argv[1])), timeout=10) as raw:
    with context.wrap_socket(raw, server_hostname="localhost") as tls:
        peer = tls.getpeercert()["subject"]
print(json.dumps({"loaded_at_creation": loaded, "verified": bool(peer)}))
"""


def hashed_directory(directory: Path, cert: Path) -> Path:
    """``directory`` holding ``cert`` under its subject hash, as ``c_rehash`` lays it out."""
    directory.mkdir()
    subject_hash = subprocess.run(
        ["openssl", "x509", "-hash", "-noout", "-in", str(cert)],
        capture_output=True, text=True, check=True, timeout=30,
    ).stdout.strip()  # fmt: skip
    (directory / f"{subject_hash}.0").symlink_to(cert)
    return directory


async def test_default_contexts_load_no_ca_yet_verify_against_the_hashed_directory(
    tmp_path: Path,
) -> None:
    cert_file = os.devnull  # what lazycas sets while aiohttp is imported
    cert, key = certificate_pair(tmp_path)
    hashed = hashed_directory(tmp_path / "certs", cert)
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)

    async def ok(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    env = {**os.environ, "SSL_CERT_FILE": cert_file, "SSL_CERT_DIR": str(hashed)}
    async with tls_server(ok, served) as port:
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-c", CLIENT, str(port), env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(child.communicate(), 60)
    assert child.returncode == 0, err.decode()
    assert out.decode().strip() == '{"loaded_at_creation": 0, "verified": true}'


AIOHTTP_CAS = """
import json, os
from kube_nudge.kube import lazycas
import aiohttp.connector
print(json.dumps([aiohttp.connector._SSL_CONTEXT_VERIFIED.cert_store_stats()["x509"],
                  os.environ.get("SSL_CERT_FILE")]))
"""


def aiohttp_cas(env: dict[str, str]) -> list[object]:
    """[CAs in aiohttp's default context, SSL_CERT_FILE after the import], in a child."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SSL_CERT_")}
    done = subprocess.run(
        [sys.executable, "-c", AIOHTTP_CAS], env={**clean, **env},
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return list(json.loads(done.stdout))


@pytest.mark.skipif(hashed_ca_directory() is None, reason="no hashed system CA directory")
def test_the_bundle_is_hidden_only_for_aiohttps_import_and_only_if_it_is_the_systems(
    tmp_path: Path,
) -> None:
    system = ssl.get_default_verify_paths().openssl_cafile
    assert aiohttp_cas({}) == [0, None]  # hidden, then unset again
    assert aiohttp_cas({"SSL_CERT_FILE": system}) == [0, system]  # the same file: restored
    own, _ = certificate_pair(tmp_path)
    assert aiohttp_cas({"SSL_CERT_FILE": str(own)}) == [1, str(own)]  # a bundle of one's own
    other = hashed_directory(tmp_path / "certs", own)
    loaded, cert_file = aiohttp_cas({"SSL_CERT_DIR": str(other)})  # a directory of one's own
    assert cert_file is None and loaded != 0
