"""The shipped webhook configurations are scoped so that a webhook that is down blocks only
kai's own objects, and each one calls a path `kai webhook` serves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from kai.admission.handlers import (
    MUTATE_POD,
    VALIDATE_POD,
    VALIDATE_POD_GROUP,
    VALIDATE_QUEUE,
    VALIDATE_TOPOLOGY,
)

MANIFEST = Path(__file__).parents[3] / "manifests" / "webhook.yaml"
KAI_NAMESPACES = {"kube-system", "kai-scheduler", "kai-resource-reservation"}


def _documents() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(MANIFEST.read_text()) if doc]


def _webhooks() -> list[dict[str, Any]]:
    return [
        hook
        for doc in _documents()
        if doc["kind"].endswith("WebhookConfiguration")
        for hook in doc["webhooks"]
    ]


def test_each_webhook_calls_a_served_path_through_the_service() -> None:
    paths = {hook["clientConfig"]["service"]["path"] for hook in _webhooks()}
    assert paths == {
        f"/{id_}"
        for id_ in (MUTATE_POD, VALIDATE_POD, VALIDATE_QUEUE, VALIDATE_POD_GROUP, VALIDATE_TOPOLOGY)
    }
    services = {
        (doc["metadata"]["name"], doc["metadata"]["namespace"])
        for doc in _documents()
        if doc["kind"] == "Service"
    }
    assert {
        (hook["clientConfig"]["service"]["name"], hook["clientConfig"]["service"]["namespace"])
        for hook in _webhooks()
    } <= services


def test_every_webhook_is_quick_side_effect_free_and_has_a_failure_policy() -> None:
    for hook in _webhooks():
        assert hook["sideEffects"] == "None", hook["name"]
        assert hook["timeoutSeconds"] <= 10, hook["name"]
        assert hook["failurePolicy"] in ("Fail", "Ignore"), hook["name"]


def test_pod_webhooks_see_only_kai_scheduler_pods_outside_kube_system_and_kai() -> None:
    pod_hooks = [
        hook for hook in _webhooks() if any("pods" in rule["resources"] for rule in hook["rules"])
    ]
    assert len(pod_hooks) == 2
    for hook in pod_hooks:
        expressions = [condition["expression"] for condition in hook["matchConditions"]]
        assert expressions == ["object.spec.schedulerName == 'kai-scheduler'"]
        (selector,) = hook["namespaceSelector"]["matchExpressions"]
        assert selector["key"] == "kubernetes.io/metadata.name"
        assert selector["operator"] == "NotIn"
        assert set(selector["values"]) == KAI_NAMESPACES


def test_the_schedulers_own_pod_group_writes_never_wait_for_the_webhook() -> None:
    (hook,) = [hook for hook in _webhooks() if hook["name"] == "podgroups.kai.scheduler"]
    (condition,) = hook["matchConditions"]
    assert "system:serviceaccount:kai-scheduler:kai-scheduler" in condition["expression"]


def test_the_webhook_runs_without_a_lease_in_two_replicas_kept_by_a_budget() -> None:
    (deployment,) = [doc for doc in _documents() if doc["kind"] == "Deployment"]
    assert deployment["spec"]["replicas"] >= 2
    (budget,) = [doc for doc in _documents() if doc["kind"] == "PodDisruptionBudget"]
    assert budget["spec"]["selector"] == deployment["spec"]["selector"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["args"][0] == "webhook"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
