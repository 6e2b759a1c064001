"""Helpers for the admission tests: `kai webhook` as its own process, called by kube-apiserver.

The webhook runs as users run it (`kai webhook` with a serving certificate from
`kai webhook-certs`' code), and the webhook configurations are the shipped ones
(`manifests/webhook.yaml`) with two changes a test needs: the API server reaches the
webhook by URL on the loopback address instead of through a Service, and pod and
PodGroup webhooks see only the test's namespace, so other tests never depend on them.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from kai_operator_support import unique, wait_for
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from kai.admission.certs import webhook_certificate, with_ca_bundle
from kai.testing.controlplane import ClusterAccess
from kai.testing.processes import Child, free_loopback_port

REPO_ROOT = Path(__file__).resolve().parents[2]
MANIFEST = REPO_ROOT / "manifests" / "webhook.yaml"
STOP_SECONDS = 20.0
KINDS = {
    "ValidatingWebhookConfiguration": "validating_webhook_configuration",
    "MutatingWebhookConfiguration": "mutating_webhook_configuration",
}


@dataclass
class Webhook:
    child: Child
    port: int
    liveness_port: int
    ca: bytes

    def stop(self) -> None:
        self.child.stop(STOP_SECONDS)


@contextlib.asynccontextmanager
async def running_webhook(
    control_plane: ClusterAccess, directory: Path, kubeconfig: Path | None = None
) -> AsyncIterator[Webhook]:
    """`kai webhook` on the loopback address with a fresh certificate, logged in with
    `kubeconfig` (default: admin); stopped on exit."""
    certificate = webhook_certificate(["127.0.0.1", "localhost"], datetime.timedelta(days=1))
    pair = certificate.serving.write(directory / "webhook")
    port, liveness_port = free_loopback_port(), free_loopback_port()
    argv = [
        sys.executable,
        "-m",
        "kai.cli.main",
        "webhook",
        f"--kubeconfig={kubeconfig or control_plane.kubeconfig}",
        "--host=127.0.0.1",
        f"--port={port}",
        f"--cert-file={pair.cert}",
        f"--key-file={pair.key}",
        f"--liveness-endpoint=http://127.0.0.1:{liveness_port}/healthz",
        "--runtime-class=",
        "--log-level=debug",
    ]
    webhook = Webhook(
        Child("kai-webhook", argv, directory / "webhook.log"), port, liveness_port, certificate.ca
    )
    try:
        await wait_for(
            "kai webhook's liveness probe", lambda: _live(webhook), timeout=90, every=0.2
        )
        # The probe answers once the process runs, which can be before the webhook's own
        # server listens: a call then fails "connection refused" (seen on a loaded machine).
        await wait_for("kai webhook's port", lambda: _listening(webhook), timeout=90, every=0.2)
        yield webhook
    finally:
        webhook.stop()


async def _live(webhook: Webhook) -> bool:
    if webhook.child.exit_code() is not None:
        raise AssertionError(f"kai webhook exited:\n{webhook.child.log_tail()}")
    return await http_status(f"http://127.0.0.1:{webhook.liveness_port}/healthz") == 200


async def _listening(webhook: Webhook) -> bool:
    if webhook.child.exit_code() is not None:
        raise AssertionError(f"kai webhook exited:\n{webhook.child.log_tail()}")
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", webhook.port)
    except OSError:
        return False
    writer.close()
    await writer.wait_closed()
    return True


async def http_status(url: str) -> int | None:
    """The status of a GET, or None when nothing answers."""
    try:
        async with aiohttp.ClientSession() as session, session.get(url) as response:
            return response.status
    except aiohttp.ClientError:
        return None


def configurations_for(
    webhook: Webhook, namespace: str, failure_policy: str | None = None
) -> list[dict[str, Any]]:
    """The shipped webhook configurations, pointed at this webhook and scoped to `namespace`."""
    documents = [doc for doc in yaml.safe_load_all(MANIFEST.read_text()) if doc]
    configurations = with_ca_bundle(
        [doc for doc in documents if doc["kind"] in KINDS],
        webhook.ca,
        failure_policy,  # type: ignore[arg-type]
    )
    suffix = unique("test")
    for configuration in configurations:
        configuration["metadata"]["name"] = f"{configuration['metadata']['name']}-{suffix}"
        for hook in configuration["webhooks"]:
            service = hook["clientConfig"].pop("service")
            hook["clientConfig"]["url"] = f"https://127.0.0.1:{webhook.port}{service['path']}"
            if "namespaceSelector" in hook:
                hook["namespaceSelector"] = {
                    "matchLabels": {"kubernetes.io/metadata.name": namespace}
                }
    return configurations


@contextlib.asynccontextmanager
async def installed(
    api: client.ApiClient, configurations: list[dict[str, Any]]
) -> AsyncIterator[None]:
    """The webhook configurations, created and removed again even when the test fails."""
    admission = client.AdmissionregistrationV1Api(api)
    created: list[tuple[str, str]] = []
    try:
        for configuration in configurations:
            kind = KINDS[configuration["kind"]]
            await getattr(admission, f"create_{kind}")(configuration)
            created.append((kind, configuration["metadata"]["name"]))
        yield
    finally:
        for kind, name in created:
            with contextlib.suppress(ApiException):
                await getattr(admission, f"delete_{kind}")(name)
        await asyncio.sleep(0)


async def refusal(create: Any) -> str | None:
    """The API server's message when `create()` is refused by an admission webhook (the
    webhook's answer, or its failure to answer), None when admitted; any other error raises."""
    try:
        await create()
    except ApiException as error:
        body = str(error.body)
        if "webhook" in body:  # 'admission webhook ... denied' or 'failed calling webhook'
            return body
        raise
    return None
