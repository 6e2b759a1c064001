"""The webhook's serving certificate and the `caBundle` the API server checks it with.

For clusters without cert-manager: `kai webhook-certs -f manifests/webhook.yaml` prints
the manifests back with a TLS Secret for the webhook's Service name and every webhook's
`clientConfig.caBundle` filled, ready for `kubectl apply -f -`. Running it again makes a
new CA and certificate; the webhook re-reads the mounted Secret when it changes.
"""

from __future__ import annotations

import base64
import copy
import datetime
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from kai.kube.tls import SERVER_AUTH, Pem, certificate_authority, sign

FailurePolicy = Literal["Fail", "Ignore"]
WEBHOOK_KINDS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")


@dataclass(frozen=True)
class WebhookCertificate:
    ca: bytes
    serving: Pem


def service_hosts(service: str, namespace: str) -> list[str]:
    """The names a Service is reached by inside the cluster; the API server uses `.svc`."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def webhook_certificate(hosts: Sequence[str], validity: datetime.timedelta) -> WebhookCertificate:
    issuer = certificate_authority("kai-webhook-ca", validity)
    return WebhookCertificate(issuer.pem.cert, sign(issuer, hosts[0], SERVER_AUTH, hosts=hosts))


def tls_secret(name: str, namespace: str, certificate: WebhookCertificate) -> dict[str, Any]:
    def encoded(data: bytes) -> str:
        return base64.b64encode(data).decode("ascii")

    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": name, "namespace": namespace},
        "data": {
            "tls.crt": encoded(certificate.serving.cert),
            "tls.key": encoded(certificate.serving.key),
            "ca.crt": encoded(certificate.ca),
        },
    }


def with_ca_bundle(
    documents: Iterable[Mapping[str, Any]],
    ca: bytes,
    failure_policy: FailurePolicy | None = None,
) -> list[dict[str, Any]]:
    """The documents, each webhook configuration trusting `ca` (and with `failure_policy`)."""
    bundle = base64.b64encode(ca).decode("ascii")
    out: list[dict[str, Any]] = []
    for document in documents:
        changed = copy.deepcopy(dict(document))
        if changed.get("kind") in WEBHOOK_KINDS:
            for webhook in changed.get("webhooks") or []:
                webhook.setdefault("clientConfig", {})["caBundle"] = bundle
                if failure_policy is not None:
                    webhook["failurePolicy"] = failure_policy
        out.append(changed)
    return out
