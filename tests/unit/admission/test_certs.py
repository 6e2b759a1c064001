"""`kai webhook-certs`: a certificate the API server accepts for the Service, and every caBundle."""

from __future__ import annotations

import base64
import datetime
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from kai.admission.certs import service_hosts, tls_secret, webhook_certificate, with_ca_bundle
from kai.cli.main import main

MANIFEST = Path(__file__).parents[3] / "manifests" / "webhook.yaml"


def _verify(ca: bytes, leaf: bytes, host: str) -> None:
    store = Store([x509.load_pem_x509_certificate(ca)])
    verifier = PolicyBuilder().store(store).build_server_verifier(x509.DNSName(host))
    verifier.verify(x509.load_pem_x509_certificate(leaf), [])


def test_the_serving_certificate_is_trusted_for_the_service_name_the_api_server_uses() -> None:
    certificate = webhook_certificate(
        service_hosts("kai-webhook", "kai-scheduler"), datetime.timedelta(days=30)
    )
    _verify(certificate.ca, certificate.serving.cert, "kai-webhook.kai-scheduler.svc")
    try:
        _verify(certificate.ca, certificate.serving.cert, "other.kai-scheduler.svc")
    except VerificationError:
        pass
    else:
        raise AssertionError("a certificate for another name was accepted")
    other = webhook_certificate(["kai-webhook.kai-scheduler.svc"], datetime.timedelta(days=1))
    try:
        _verify(other.ca, certificate.serving.cert, "kai-webhook.kai-scheduler.svc")
    except VerificationError:
        pass
    else:
        raise AssertionError("another CA was trusted")


def test_the_secret_holds_the_pair_and_the_ca() -> None:
    certificate = webhook_certificate(["svc"], datetime.timedelta(days=1))
    secret = tls_secret("kai-webhook-tls", "kai-scheduler", certificate)
    assert secret["type"] == "kubernetes.io/tls"
    data = {key: base64.b64decode(value) for key, value in secret["data"].items()}
    assert data == {
        "tls.crt": certificate.serving.cert,
        "tls.key": certificate.serving.key,
        "ca.crt": certificate.ca,
    }


def test_every_webhook_gets_the_ca_and_the_failure_policy_and_nothing_else_changes() -> None:
    documents = [doc for doc in yaml.safe_load_all(MANIFEST.read_text()) if doc]
    changed = with_ca_bundle(documents, b"CA", "Ignore")
    hooks = [
        hook
        for doc in changed
        if doc["kind"].endswith("WebhookConfiguration")
        for hook in doc["webhooks"]
    ]
    assert len(hooks) == 5
    assert {hook["clientConfig"]["caBundle"] for hook in hooks} == {"Q0E="}
    assert {hook["failurePolicy"] for hook in hooks} == {"Ignore"}
    others = [doc for doc in changed if not doc["kind"].endswith("WebhookConfiguration")]
    assert others == [doc for doc in documents if not doc["kind"].endswith("WebhookConfiguration")]
    assert "caBundle" not in str(documents)  # the input is not changed


def test_the_command_prints_the_secret_then_the_manifests(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["webhook-certs", "-f", str(MANIFEST), "--namespace", "ai"]) == 0
    printed = list(yaml.safe_load_all(capsys.readouterr().out))
    assert printed[0]["kind"] == "Secret" and printed[0]["metadata"]["namespace"] == "ai"
    ca = base64.b64decode(printed[0]["data"]["ca.crt"])
    leaf = base64.b64decode(printed[0]["data"]["tls.crt"])
    _verify(ca, leaf, "kai-webhook.ai.svc")
    bundles = {
        hook["clientConfig"]["caBundle"]
        for doc in printed
        if doc["kind"].endswith("WebhookConfiguration")
        for hook in doc["webhooks"]
    }
    assert bundles == {base64.b64encode(ca).decode()}


def test_a_missing_manifest_file_is_an_error_naming_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    missing = tmp_path / "nope.yaml"
    assert main(["webhook-certs", "-f", str(missing)]) == 2
    assert str(missing) in capsys.readouterr().err
