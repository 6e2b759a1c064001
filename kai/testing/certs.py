"""Certificates and keys for a throw-away control plane.

kube-apiserver serves TLS only and authenticates its clients by certificate, so
each start needs a CA, a serving certificate for the loopback address, one
client certificate per caller, and a key pair to sign service-account tokens.
ECDSA P-256 keys keep generation instant, which matters for the warm-start time.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = datetime.timedelta(days=7)


@dataclass(frozen=True)
class KeyPair:
    """A PEM certificate and its PEM private key on disk."""

    cert: Path
    key: Path


@dataclass(frozen=True)
class Pki:
    """Everything the control plane needs to run TLS and sign tokens."""

    ca: KeyPair
    serving: KeyPair
    admin: KeyPair
    controller_manager: KeyPair
    service_account_key: Path
    service_account_pub: Path


@dataclass(frozen=True)
class _Issuer:
    name: x509.Name
    key: ec.EllipticCurvePrivateKey


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization is not None:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


def _builder(
    subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
    )


def _key_usage(*, signs_certificates: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=signs_certificates,
        crl_sign=signs_certificates,
        encipher_only=False,
        decipher_only=False,
    )


def _write_cert(cert: x509.Certificate, path: Path) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _leaf(
    issuer: _Issuer,
    subject: x509.Name,
    usage: x509.ObjectIdentifier,
    *,
    out: Path,
    san: x509.SubjectAlternativeName | None = None,
) -> KeyPair:
    """Sign a certificate for ``subject``; write it to ``out``.crt and its key to ``out``.key."""
    key = _new_key()
    builder = (
        _builder(subject, issuer.name, key)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(signs_certificates=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if san is not None:
        builder = builder.add_extension(san, critical=False)
    pair = KeyPair(cert=out.with_suffix(".crt"), key=out.with_suffix(".key"))
    _write_cert(builder.sign(issuer.key, hashes.SHA256()), pair.cert)
    _write_key(key, pair.key)
    return pair


def _certificate_authority(directory: Path) -> tuple[_Issuer, KeyPair]:
    key = _new_key()
    name = _name("kai-test-ca")
    cert = (
        _builder(name, name, key)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(signs_certificates=True), critical=True)
        .sign(key, hashes.SHA256())
    )
    pair = KeyPair(cert=directory / "ca.crt", key=directory / "ca.key")
    _write_cert(cert, pair.cert)
    _write_key(key, pair.key)
    return _Issuer(name=name, key=key), pair


def write_pki(directory: Path) -> Pki:
    """Create a fresh CA and every certificate and key under ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    issuer, ca = _certificate_authority(directory)
    loopback = x509.SubjectAlternativeName(
        [
            x509.DNSName("localhost"),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        ]
    )
    serving = _leaf(
        issuer,
        _name("kube-apiserver"),
        ExtendedKeyUsageOID.SERVER_AUTH,
        out=directory / "apiserver",
        san=loopback,
    )
    # O=system:masters is the group that RBAC's bootstrap policy lets do anything.
    admin = _leaf(
        issuer,
        _name("kai-admin", "system:masters"),
        ExtendedKeyUsageOID.CLIENT_AUTH,
        out=directory / "admin",
    )
    # The user name the bootstrap policy grants kube-controller-manager's rights to.
    controller_manager = _leaf(
        issuer,
        _name("system:kube-controller-manager"),
        ExtendedKeyUsageOID.CLIENT_AUTH,
        out=directory / "controller-manager",
    )
    sa_key = _new_key()
    sa_key_path = directory / "service-account.key"
    sa_pub_path = directory / "service-account.pub"
    _write_key(sa_key, sa_key_path)
    sa_pub_path.write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return Pki(
        ca=ca,
        serving=serving,
        admin=admin,
        controller_manager=controller_manager,
        service_account_key=sa_key_path,
        service_account_pub=sa_pub_path,
    )
