"""What every kai process that kopf runs shares: its login, and how kopf is started and ended.

kopf talks to the API server with its own aiohttp session and asks a login handler
for the endpoint and credentials. kopf's built-in handlers read kubeconfig files
themselves or go through the synchronous `kubernetes` client; this one loads them
with kubernetes-asyncio, exactly as `kai.kube.client.connect` does, so `--kubeconfig`,
the in-cluster ServiceAccount (and its rotating token) and the default kubeconfig mean
the same thing to kopf and to kai's own informers. Every kai process runs kopf
standalone (kopf's peering is not used: the scheduler has its own Lease, the webhook
needs none) and cluster-wide.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import kopf
import structlog

from kai.kube.client import load_configuration

log = structlog.get_logger(__name__)


async def run_kopf(
    registry: kopf.OperatorRegistry,
    settings: kopf.OperatorSettings,
    liveness_endpoint: str | None,
    stop_flag: asyncio.Event | None = None,
) -> bool:
    """kopf until SIGINT, SIGTERM or `stop_flag`; False when a startup handler failed (kopf
    has logged which and why), so the process exits 1 without a traceback."""
    try:
        await kopf.operator(
            registry=registry,
            settings=settings,
            standalone=True,
            clusterwide=True,
            liveness_endpoint=liveness_endpoint,
            stop_flag=stop_flag,
        )
    except Exception as error:  # the startup activity failed
        log.error("did not start", error=str(error))
        return False
    return True


def register_login(registry: kopf.OperatorRegistry, kubeconfig: Path | None) -> None:
    """Make `connection_info(kubeconfig)` the registry's only login handler."""

    @kopf.on.login(id="login", registry=registry, errors=kopf.ErrorsMode.PERMANENT)
    async def login(**_: Any) -> kopf.ConnectionInfo:
        return await connection_info(kubeconfig)


async def connection_info(kubeconfig: Path | None) -> kopf.ConnectionInfo:
    """kopf's view of the credentials; called again by kopf when the server answers 401."""
    configuration = await load_configuration(kubeconfig)
    authorization = (await configuration.auth_settings()).get("BearerToken", {}).get("value")
    scheme, token = _split_authorization(authorization)
    return kopf.ConnectionInfo(
        server=str(configuration.host),
        ca_path=configuration.ssl_ca_cert or None,
        insecure=not configuration.verify_ssl,
        certificate_path=configuration.cert_file or None,
        private_key_path=configuration.key_file or None,
        scheme=scheme,
        token=token,
        proxy_url=configuration.proxy or None,
    )


def _split_authorization(value: str | None) -> tuple[str | None, str | None]:
    """`Bearer abc` -> (`Bearer`, `abc`); kubernetes-asyncio keeps the scheme in the value."""
    if not value:
        return None, None
    scheme, _, token = value.partition(" ")
    return (scheme, token) if token else ("Bearer", scheme)
