"""Kubeconfig files for the test control plane: admin, components, ServiceAccounts.

Any kubectl or client library reads these, so a developer can point tools at
the cluster the tests use, and RBAC tests can act as a ServiceAccount.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from kubernetes_asyncio import client

from kai.testing.certs import KeyPair

_NAME = "kai-test"


def write_kubeconfig(path: Path, server: str, ca_cert: Path, user: dict[str, str]) -> Path:
    """Write a one-context kubeconfig for ``server``; ``user`` holds the credentials."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": _NAME,
                "cluster": {"server": server, "certificate-authority": str(ca_cert)},
            }
        ],
        "users": [{"name": _NAME, "user": user}],
        "contexts": [{"name": _NAME, "context": {"cluster": _NAME, "user": _NAME}}],
        "current-context": _NAME,
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path


def certificate_user(pair: KeyPair) -> dict[str, str]:
    """Kubeconfig credentials for a client certificate."""
    return {"client-certificate": str(pair.cert), "client-key": str(pair.key)}


async def service_account_kubeconfig(
    api: client.ApiClient,
    *,
    namespace: str,
    service_account: str,
    server: str,
    ca_cert: Path,
    path: Path,
    expiration_seconds: int = 3600,
) -> Path:
    """Request a token for a ServiceAccount (TokenRequest API) and write its kubeconfig."""
    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=expiration_seconds)
    )
    issued = await client.CoreV1Api(api).create_namespaced_service_account_token(
        service_account, namespace, request
    )
    return write_kubeconfig(path, server, ca_cert, {"token": issued.status.token})
