"""Certificate authorities and the certificates they sign, for TLS inside a cluster.

The admission webhook needs a serving certificate the API server trusts (its CA goes
into the webhook configurations' `caBundle`), and the test control plane needs one
for kube-apiserver and its clients. Both are made here; ECDSA P-256 keys keep
generation instant.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

SERVER_AUTH = ExtendedKeyUsageOID.SERVER_AUTH
CLIENT_AUTH = ExtendedKeyUsageOID.CLIENT_AUTH


@dataclass(frozen=True)
class Pem:
    """A certificate and its private key, PEM-encoded."""

    cert: bytes
    key: bytes

    def write(self, out: Path) -> KeyPair:
        """Write to ``out``.crt and ``out``.key (the key readable by the owner only)."""
        pair = KeyPair(cert=out.with_suffix(".crt"), key=out.with_suffix(".key"))
        pair.cert.write_bytes(self.cert)
        pair.key.write_bytes(self.key)
        pair.key.chmod(0o600)
        return pair


@dataclass(frozen=True)
class KeyPair:
    """A PEM certificate and its PEM private key on disk."""

    cert: Path
    key: Path


@dataclass(frozen=True)
class Issuer:
    """A certificate authority that can sign leaf certificates."""

    name: x509.Name
    key: ec.EllipticCurvePrivateKey
    pem: Pem
    validity: datetime.timedelta


def new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def certificate_authority(common_name: str, validity: datetime.timedelta) -> Issuer:
    """A self-signed CA whose certificates are valid for ``validity`` from now."""
    key = new_key()
    name = _name(common_name)
    cert = (
        _builder(name, name, key, validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(signs_certificates=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return Issuer(name, key, Pem(_cert_pem(cert), key_pem(key)), validity)


def sign(
    issuer: Issuer,
    common_name: str,
    usage: x509.ObjectIdentifier,
    *,
    organization: str | None = None,
    hosts: Sequence[str] = (),
) -> Pem:
    """A leaf certificate for ``common_name``; ``hosts`` (DNS names or IPs) become its SANs."""
    key = new_key()
    builder = (
        _builder(_name(common_name, organization), issuer.name, key, issuer.validity)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(signs_certificates=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        # Strict verifiers (RFC 5280 profiles) require the issuer's key id on a leaf.
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer.key.public_key()),
            critical=False,
        )
    )
    if hosts:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([_general_name(host) for host in hosts]), critical=False
        )
    return Pem(_cert_pem(builder.sign(issuer.key, hashes.SHA256())), key_pem(key))


def _general_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization is not None:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


def _builder(
    subject: x509.Name,
    issuer: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    validity: datetime.timedelta,
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))  # clock skew between nodes
        .not_valid_after(now + validity)
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


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)
