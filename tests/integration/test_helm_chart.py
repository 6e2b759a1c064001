"""The Helm chart: it lints, its objects pass the real API server's validation, the README's
`helm install` installs it, the scheduler runs with the chart's ServiceAccount, and
`helm uninstall` keeps the queues.

No kubelet runs pods here, so the chart's Deployments never start; the scheduler runs in
this process with a token of the chart's ServiceAccount, as its pods would. For the same
reason the webhook's Service has no endpoints: after the README's install the release is
upgraded with `admission.failurePolicy=Ignore`, which also shows that an upgrade keeps the
webhook's certificate.
"""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import yaml
from kai_operator_support import (
    bound_pods,
    create_queue,
    delete_queue,
    get_queue,
    gpu_job,
    operator_config,
    running_operator,
    unique,
    wait_for,
)
from kai_readme_support import REPO_ROOT, Shell, readme_block
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from kai.testing.controlplane import ClusterAccess
from kai.testing.fakes import GpuNode, NodeFactory
from kai.testing.kubeconfig import service_account_kubeconfig

CHART = REPO_ROOT / "charts" / "kai-scheduler"
MANIFESTS = REPO_ROOT / "manifests"
HEADING = "## Install with Helm"
RELEASE_NAMESPACE = "kai-scheduler"
RESERVATIONS = "kai-resource-reservation"
DEFAULT_QUEUES = ("default-parent-queue", "default-queue")
CLUSTER_OBJECTS = (
    ("clusterrole", "kai-scheduler"),
    ("clusterrole", "kai-webhook"),
    ("priorityclass", "train"),
    ("mutatingwebhookconfiguration", "kai-webhook"),
    ("validatingwebhookconfiguration", "kai-webhook"),
)


def _documents(text: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


def _find(documents: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [d for d in documents if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


def _without_ca(webhooks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    copies = copy.deepcopy(webhooks)
    for hook in copies:
        hook["clientConfig"].pop("caBundle", None)
    return sorted(copies, key=lambda hook: hook["name"])


async def test_the_chart_lints_and_renders_what_manifests_ship(helm: Path, tmp_path: Path) -> None:
    shell = Shell([helm], tmp_path / "no-kubeconfig")
    await shell.run(f"helm lint --strict {CHART}")
    rendered = _documents(
        await shell.run(f"helm template kai-scheduler {CHART} --namespace {RELEASE_NAMESPACE}")
    )
    shipped = [
        doc for path in sorted(MANIFESTS.glob("*.yaml")) for doc in _documents(path.read_text())
    ]
    # One set of permissions and one admission scope, whichever way kai is installed.
    for name in ("kai-scheduler", "kai-webhook"):
        assert (
            _find(rendered, "ClusterRole", name)["rules"]
            == _find(shipped, "ClusterRole", name)["rules"]
        )
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        chart_hooks = _without_ca(_find(rendered, kind, "kai-webhook")["webhooks"])
        assert chart_hooks == _without_ca(_find(shipped, kind, "kai-webhook")["webhooks"])
    secret = _find(rendered, "Secret", "kai-webhook-tls")
    bundle = _find(rendered, "ValidatingWebhookConfiguration", "kai-webhook")["webhooks"][0]
    assert bundle["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
    for queue in DEFAULT_QUEUES:
        assert _find(rendered, "Queue", queue)["metadata"]["annotations"][
            "helm.sh/resource-policy"
        ] == ("keep")


async def test_node_pools_add_one_scheduler_deployment_per_pool(helm: Path, tmp_path: Path) -> None:
    """Each listed pool gets its own shard (`--node-pool`, hence its own Lease); the default
    shard's Deployment stays as it was, and the metrics Service covers every shard."""
    shell = Shell([helm], tmp_path / "no-kubeconfig")
    pools = "--set 'scheduler.nodePools={a,gpu-h100}'"
    await shell.run(f"helm lint --strict {CHART} {pools}")
    rendered = _documents(
        await shell.run(f"helm template kai-scheduler {CHART} -n {RELEASE_NAMESPACE} {pools}")
    )
    plain = _documents(
        await shell.run(f"helm template kai-scheduler {CHART} -n {RELEASE_NAMESPACE}")
    )
    deployments = {d["metadata"]["name"]: d for d in rendered if d["kind"] == "Deployment"}
    schedulers = {name for name in deployments if name.startswith("kai-scheduler")}
    assert schedulers == {"kai-scheduler", "kai-scheduler-a", "kai-scheduler-gpu-h100"}
    assert deployments["kai-scheduler"] == _find(plain, "Deployment", "kai-scheduler")
    selectors = []
    for name in schedulers:
        spec = deployments[name]["spec"]
        args = spec["template"]["spec"]["containers"][0]["args"]
        pool = name.removeprefix("kai-scheduler").removeprefix("-")
        assert [a for a in args if a.startswith("--node-pool")] == (
            [f"--node-pool={pool}"] if pool else []
        )
        selectors.append(spec["selector"]["matchLabels"])
        labels = spec["template"]["metadata"]["labels"]
        service = _find(rendered, "Service", "kai-scheduler-metrics")["spec"]["selector"]
        assert service.items() <= labels.items()
    assert (
        len({json.dumps(s, sort_keys=True) for s in selectors}) == 3
    )  # no Deployment adopts another's pods
    refused = await shell.run(
        f"helm template kai-scheduler {CHART} --set 'scheduler.nodePools={{A_b}}' 2>&1", check=False
    )
    assert "must be a DNS label" in refused


async def test_the_rendered_chart_passes_the_api_servers_validation(
    helm: Path, kubectl: Path, namespace: str, control_plane: ClusterAccess, tmp_path: Path
) -> None:
    shell = Shell([helm, kubectl], control_plane.kubeconfig)
    rendered = tmp_path / "rendered.yaml"
    await shell.run(
        f"helm template kai-scheduler {CHART} --namespace {namespace} --include-crds "
        f"--set dashboards.enabled=true --set global.resourceReservation.createNamespace=false "
        f"--set global.resourceReservation.namespace={namespace} > {rendered}"
    )
    kinds = {doc["kind"] for doc in _documents(rendered.read_text())}
    assert {"Deployment", "ConfigMap", "Queue", "CustomResourceDefinition"} <= kinds
    out = await shell.run(f"kubectl apply --dry-run=server -f {rendered} -o name")
    assert "deployment.apps/kai-scheduler" in out and "configmap/kai-scheduler-dashboards" in out


async def test_helm_install_runs_the_scheduler_and_uninstall_keeps_the_queues(
    helm: Path,
    kubectl: Path,
    api: client.ApiClient,
    namespace: str,
    gpu_nodes: NodeFactory,
    control_plane: ClusterAccess,
    tmp_path: Path,
) -> None:
    shell = Shell([helm, kubectl], control_plane.kubeconfig)
    for kind, name in CLUSTER_OBJECTS:  # left by no earlier test, or the install would clash
        found = await shell.kubectl("get", kind, name, "--ignore-not-found", "-o", "name")
        assert not found.strip(), f"{kind}/{name} exists before the install"
    leftover = await shell.kubectl(
        "get", "serviceaccount", "kai-scheduler", "-n", RELEASE_NAMESPACE, "--ignore-not-found"
    )
    assert not leftover.strip(), "a kai-scheduler ServiceAccount exists before the install"
    (install,) = readme_block(HEADING)
    assert install.startswith("helm install ")
    core = client.CoreV1Api(api)
    created = [ns for ns in (RELEASE_NAMESPACE, RESERVATIONS) if not await _exists(core, ns)]
    try:
        await shell.run(install)
        before = await core.read_namespaced_secret("kai-webhook-tls", RELEASE_NAMESPACE)
        await shell.run(
            f"helm upgrade kai-scheduler {CHART} --namespace {RELEASE_NAMESPACE} --reuse-values "
            "--set admission.failurePolicy=Ignore"
        )
        after = await core.read_namespaced_secret("kai-webhook-tls", RELEASE_NAMESPACE)
        assert after.data == before.data  # the upgrade kept the certificate
        validating = json.loads(
            await shell.kubectl(
                "get", "validatingwebhookconfiguration", "kai-webhook", "-o", "json"
            )
        )
        assert {hook["clientConfig"]["caBundle"] for hook in validating["webhooks"]} == {
            before.data["ca.crt"]
        }
        assert base64.b64decode(before.data["ca.crt"]).startswith(b"-----BEGIN CERTIFICATE")

        kubeconfig = await service_account_kubeconfig(
            api,
            namespace=RELEASE_NAMESPACE,
            service_account="kai-scheduler",
            server=control_plane.server,
            ca_cert=control_plane.ca_cert,
            path=tmp_path / "chart-scheduler.kubeconfig",
        )
        queue = unique("helm")
        await create_queue(api, queue, parent="default-parent-queue")
        for _ in range(2):
            await gpu_nodes(GpuNode(name=unique("gpu"), gpus=2, gpu_memory_mib=40960))
        config = operator_config(kubeconfig, RELEASE_NAMESPACE, reservation_namespace=RESERVATIONS)
        try:
            async with running_operator(config):
                job = gpu_job("gang", queue, parallelism=2, gpus=2, min_member=2)
                await client.BatchV1Api(api).create_namespaced_job(namespace, job)

                async def gang_bound() -> bool:
                    return len(await bound_pods(api, namespace)) == 2

                await wait_for("the gang bound by the chart's ServiceAccount", gang_bound)
        finally:
            await delete_queue(api, queue)
    finally:
        await shell.run(f"helm uninstall kai-scheduler --namespace {RELEASE_NAMESPACE} --wait")
        kept = [await get_queue(api, name) for name in DEFAULT_QUEUES]
        try:
            assert [q["metadata"]["name"] for q in kept] == list(DEFAULT_QUEUES)
            for kind, name in CLUSTER_OBJECTS:
                found = await shell.kubectl("get", kind, name, "--ignore-not-found", "-o", "name")
                assert not found.strip(), f"{kind}/{name} survived helm uninstall"
        finally:
            for name in reversed(DEFAULT_QUEUES):
                await delete_queue(api, name)
            for name in created:  # the install made them; others' namespaces stay
                await _delete_namespace(core, name)


async def _exists(core: client.CoreV1Api, name: str) -> bool:
    try:
        await core.read_namespace(name)
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


async def _delete_namespace(core: client.CoreV1Api, name: str) -> None:
    """Delete and wait until gone, so later tests can create it afresh."""
    try:
        await core.delete_namespace(name)
    except ApiException as error:
        if error.status != 404:
            raise

    async def gone() -> bool:
        return not await _exists(core, name)

    await wait_for(f"namespace {name} to be deleted", gone, timeout=120, every=0.5)
