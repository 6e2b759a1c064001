"""`kai webhook` as a kopf operator: kopf serves the admission handlers over HTTPS.

The webhook runs as its own Deployment, apart from the scheduler: it holds no Lease
(every replica answers, so a rollout or one lost pod does not stop admission) and no
solve can delay an answer. kopf provides the server (`kopf.WebhookServer`, which
reloads the certificate when the mounted Secret changes), the process lifecycle and
the liveness endpoint. The webhook configurations are shipped in `manifests/`, not
managed by kopf, so the process needs no right to change them and a cluster admin
decides their scope and failure policy. Peering is off: there is nothing to pause.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kopf
import structlog

from kai.admission.handlers import admission_registry
from kai.kube.client import Kube, connect
from kai.kube.kopf_process import register_login, run_kopf

log = structlog.get_logger(__name__)

QUEUES_PATH = "/apis/scheduling.run.ai/v2/queues"


@dataclass(frozen=True)
class WebhookConfig:
    kubeconfig: Path | None = None
    host: str = "0.0.0.0"
    port: int = 9443
    cert_file: Path | None = None
    key_file: Path | None = None
    """The serving certificate (tls.crt and tls.key of the Secret); kopf re-reads them when
    they change. Without them kopf makes a self-signed one (for trying it out only)."""
    liveness_endpoint: str | None = "http://0.0.0.0:8081/healthz"
    runtime_class: str | None = "nvidia"
    """The runtime class a fractional pod gets when it names none (KAI's default)."""


class _QueueReader:
    """The cluster's queues, read through kai's own client when a Queue is admitted."""

    def __init__(self, kubeconfig: Path | None) -> None:
        self._kubeconfig = kubeconfig
        self._stack = contextlib.AsyncExitStack()
        self._kube: Kube | None = None

    async def open(self) -> None:
        client = await self._stack.enter_async_context(await connect(self._kubeconfig))
        self._kube = Kube(client)

    async def close(self) -> None:
        await self._stack.aclose()

    async def __call__(self) -> Mapping[str, Mapping[str, Any]]:
        if self._kube is None:
            raise RuntimeError("the webhook's API client is not open")
        listing = await self._kube.get(QUEUES_PATH)
        return {item["metadata"]["name"]: item for item in listing.get("items") or []}


async def run_webhook(config: WebhookConfig) -> int:
    """Serve admission requests until SIGINT or SIGTERM."""
    queues = _QueueReader(config.kubeconfig)
    registry = admission_registry(queues, config.runtime_class)

    register_login(registry, config.kubeconfig)

    @kopf.on.startup(id="open-client", registry=registry, errors=kopf.ErrorsMode.PERMANENT)
    async def open_client(**_: Any) -> None:
        try:
            await queues.open()
        except Exception as error:  # no credentials: say so once, without a traceback
            raise kopf.PermanentError(f"cannot connect to the API server: {error}") from error
        log.info("webhook serving", host=config.host, port=config.port)

    @kopf.on.cleanup(id="close-client", registry=registry)
    async def close_client(**_: Any) -> None:
        await queues.close()

    @kopf.on.probe(id="webhook", registry=registry)
    def webhook_probe(**_: Any) -> str:
        return "serving"

    settings = kopf.OperatorSettings()
    settings.posting.enabled = False
    settings.admission.managed = None  # the configurations come from manifests/webhook.yaml
    settings.admission.server = kopf.WebhookServer(
        addr=config.host,
        port=config.port,
        certfile=str(config.cert_file) if config.cert_file else None,
        pkeyfile=str(config.key_file) if config.key_file else None,
        file_check_interval=10.0,
    )
    return 0 if await run_kopf(registry, settings, config.liveness_endpoint) else 1
