"""Throwaway PKI for the local cluster: a CA, the API server's serving cert, an admin client
cert in ``system:masters``, and the service-account signing key pair."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True, slots=True)
class Pki:
    """Paths of the PEM files written by :func:`write_pki`."""

    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path
    sa_public: Path
    sa_private: Path


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _name(common_name: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=7))
    )


def _write_ca(
    cert_path: Path, key_path: Path
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A new CA (a week's validity) written to ``cert_path`` and ``key_path``."""
    ca_key = _key()
    ca_name = _name("kube-nudge-dev-ca")
    ca = (
        _builder(ca_name, ca_name, ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    _write_key(key_path, ca_key)
    cert_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    return ca_key, ca


@dataclass(frozen=True, slots=True)
class Ca:
    """A CA's certificate and key (PEM files): the cluster's, or a throwaway one."""

    cert: Path
    key: Path


def write_ca(directory: Path) -> Ca:
    """A throwaway CA alone, in ``directory`` (``ca.crt``, ``ca.key``): for a registry run
    without a cluster (``kube-nudge-dev release`` with no ``--registry``)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = Ca(directory / "ca.crt", directory / "ca.key")
    _write_ca(ca.cert, ca.key)
    return ca


def issue_serving_cert(ca: Ca, cert_path: Path, key_path: Path, common_name: str) -> None:
    """A serving certificate for loopback (``localhost``, ``127.0.0.1``) signed by ``ca``,
    written to ``cert_path`` and ``key_path`` (what the local registry serves)."""
    ca_key = serialization.load_pem_private_key(ca.key.read_bytes(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{ca.key} is not the EC key of a kube-nudge-dev CA")
    issuer = x509.load_pem_x509_certificate(ca.cert.read_bytes()).subject
    key = _key()
    sans: list[x509.GeneralName] = [
        x509.DNSName("localhost"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
    ]
    cert = (
        _builder(_name(common_name), issuer, key.public_key())
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    _write_key(key_path, key)
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def write_pki(directory: Path) -> Pki:
    """Generate every key and certificate the control plane needs into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    pki = Pki(*(directory / name for name in (
        "ca.crt", "ca.key", "apiserver.crt", "apiserver.key",
        "admin.crt", "admin.key", "sa.pub", "sa.key",
    )))  # fmt: skip

    ca_key, ca = _write_ca(pki.ca_cert, pki.ca_key)
    ca_name = ca.subject

    serving_key = _key()
    sans: list[x509.GeneralName] = [
        x509.DNSName("localhost"),
        x509.DNSName("kubernetes.default.svc"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address("10.0.0.1")),
    ]
    serving = (
        _builder(_name("kube-apiserver"), ca_name, serving_key.public_key())
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    _write_key(pki.serving_key, serving_key)
    pki.serving_cert.write_bytes(serving.public_bytes(serialization.Encoding.PEM))

    admin_key = _key()
    admin = (
        _builder(_name("kube-nudge-admin", "system:masters"), ca_name, admin_key.public_key())
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    _write_key(pki.admin_key, admin_key)
    pki.admin_cert.write_bytes(admin.public_bytes(serialization.Encoding.PEM))

    sa_key = _key()
    _write_key(pki.sa_private, sa_key)
    pki.sa_public.write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return pki
