"""A self-signed certificate and key for tests that need TLS (made with cryptography, a
development dependency only), and an aiohttp server that serves over it."""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def certificate_pair(
    directory: Path, stem: str = "tls", *, certfile: str = "", keyfile: str = ""
) -> tuple[Path, Path]:
    """``stem.crt`` and ``stem.key`` (or the names given) in ``directory``: a certificate for
    ``localhost`` and 127.0.0.1 (also its own CA, so it can verify itself), valid an hour."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path = directory / (certfile or f"{stem}.crt")
    key_path = directory / (keyfile or f"{stem}.key")
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@contextlib.asynccontextmanager
async def tls_server(
    handler: Callable[[web.Request], Awaitable[web.StreamResponse]], tls: ssl.SSLContext
) -> AsyncIterator[int]:
    """An aiohttp server on 127.0.0.1 answering every GET with ``handler`` over ``tls``;
    yields its port."""
    app = web.Application()
    app.router.add_get("/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls)
    await site.start()
    try:
        yield runner.addresses[0][1]
    finally:
        await runner.cleanup()
