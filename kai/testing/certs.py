"""Certificates and keys for a throw-away control plane.

kube-apiserver serves TLS only and authenticates its clients by certificate, so
each start needs a CA, a serving certificate for the loopback address, one
client certificate per caller, and a key pair to sign service-account tokens.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization

from kai.kube.tls import (
    CLIENT_AUTH,
    SERVER_AUTH,
    KeyPair,
    certificate_authority,
    key_pem,
    new_key,
    sign,
)

_VALIDITY = datetime.timedelta(days=7)

__all__ = ["KeyPair", "Pki", "write_pki"]


@dataclass(frozen=True)
class Pki:
    """Everything the control plane needs to run TLS and sign tokens."""

    ca: KeyPair
    serving: KeyPair
    admin: KeyPair
    controller_manager: KeyPair
    service_account_key: Path
    service_account_pub: Path


def write_pki(directory: Path) -> Pki:
    """Create a fresh CA and every certificate and key under ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    issuer = certificate_authority("kai-test-ca", _VALIDITY)
    ca = issuer.pem.write(directory / "ca")
    serving = sign(issuer, "kube-apiserver", SERVER_AUTH, hosts=("localhost", "127.0.0.1")).write(
        directory / "apiserver"
    )
    # O=system:masters is the group that RBAC's bootstrap policy lets do anything.
    admin = sign(issuer, "kai-admin", CLIENT_AUTH, organization="system:masters").write(
        directory / "admin"
    )
    # The user name the bootstrap policy grants kube-controller-manager's rights to.
    controller_manager = sign(issuer, "system:kube-controller-manager", CLIENT_AUTH).write(
        directory / "controller-manager"
    )
    sa_key = new_key()
    sa_key_path = directory / "service-account.key"
    sa_pub_path = directory / "service-account.pub"
    sa_key_path.write_bytes(key_pem(sa_key))
    sa_key_path.chmod(0o600)
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
