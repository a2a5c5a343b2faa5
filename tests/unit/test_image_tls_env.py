"""The image sets ``SSL_CERT_FILE`` to no file (Dockerfile): default TLS contexts then load
no CA at creation (aiohttp makes one at import) and still verify against the hashed CA
directory, one CA looked up when needed. Checked in a child process with the image's
setting and a hashed directory holding a test CA."""

from __future__ import annotations

import asyncio
import os
import ssl
import subprocess
import sys
from pathlib import Path

from aiohttp import web

from tests.tls_support import certificate_pair, tls_server

DOCKERFILE = Path(__file__).resolve().parents[2] / "Dockerfile"

CLIENT = """
import json, socket, ssl, sys
context = ssl.create_default_context()
loaded = context.cert_store_stats()["x509"]
with socket.create_connection(("localhost", int(sys.argv[1])), timeout=10) as raw:
    with context.wrap_socket(raw, server_hostname="localhost") as tls:
        peer = tls.getpeercert()["subject"]
print(json.dumps({"loaded_at_creation": loaded, "verified": bool(peer)}))
"""


def image_env(name: str) -> str:
    for line in DOCKERFILE.read_text().splitlines():
        if line.startswith("ENV ") and f"{name}=" in line:
            return line.split(f"{name}=", 1)[1].split()[0]
    raise AssertionError(f"the Dockerfile sets no {name}")


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
    cert_file = image_env("SSL_CERT_FILE")
    assert not Path(cert_file).exists()
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
