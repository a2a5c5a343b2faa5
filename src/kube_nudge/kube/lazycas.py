"""aiohttp, imported without parsing the system CA bundle.

aiohttp builds a default TLS context when it is imported, and ``load_default_certs`` parses
every CA of the bundle file (144 here): 2.0 MiB RSS and about 40 ms of CPU (busy machine) at
every start, for CAs kube-nudge's API client never uses (it trusts the kubeconfig's or the
service account's CA). Where the system also keeps its CAs in a hashed directory
(``c_rehash``/``update-ca-certificates``, as Debian's ca-certificates does), OpenSSL finds
them there one at a time, when a certificate is verified: so for the import alone the bundle
file is hidden (``SSL_CERT_FILE`` set to an empty file, then restored), and aiohttp's default
context still trusts the same CAs, through the directory. Nothing changes where that
directory is missing or empty, or when ``SSL_CERT_FILE`` or ``SSL_CERT_DIR`` name another
file or directory than the system's own.
"""

from __future__ import annotations

import os
import ssl
import sys
from collections.abc import MutableMapping

__all__ = ["hashed_ca_directory", "import_aiohttp"]


def hashed_ca_directory(paths: ssl.DefaultVerifyPaths | None = None) -> str | None:
    """OpenSSL's default CA directory if it holds hashed CA links (``*.0``), else None."""
    paths = paths or ssl.get_default_verify_paths()
    directory = paths.capath or paths.openssl_capath
    try:
        with os.scandir(directory) as entries:
            return directory if any(entry.name.endswith(".0") for entry in entries) else None
    except OSError:
        return None


def _system(chosen: str | None, default: str) -> bool:
    """True if ``chosen`` (an environment variable's value) is unset or names ``default``."""
    return chosen is None or os.path.realpath(chosen) == os.path.realpath(default)


def import_aiohttp(environ: MutableMapping[str, str] = os.environ) -> bool:
    """Import aiohttp with the CA bundle file hidden, when that is safe (see above); True
    if it was hidden."""
    if "aiohttp" in sys.modules:
        return False
    paths = ssl.get_default_verify_paths()
    chosen = environ.get("SSL_CERT_FILE")
    if not _system(chosen, paths.openssl_cafile) or not _system(
        environ.get("SSL_CERT_DIR"), paths.openssl_capath
    ):
        return False
    if hashed_ca_directory(paths) is None:
        return False
    environ["SSL_CERT_FILE"] = os.devnull
    try:
        import aiohttp  # noqa: F401
    finally:
        if chosen is None:
            del environ["SSL_CERT_FILE"]
        else:
            environ["SSL_CERT_FILE"] = chosen
    return True


import_aiohttp()
