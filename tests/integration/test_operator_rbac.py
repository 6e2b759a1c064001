"""The scheduler and the webhook work with exactly the permissions manifests/ grants, and no more.

The manifests are applied to the control plane (all but the Deployments, which
need a container runtime, and the webhook's Service, budget and configurations,
which would send every test's objects to a webhook that is not there), a token is
issued for each ServiceAccount, and each program runs with it: the scheduler
groups, binds whole and fractional pods (reservation pod, ConfigMaps) and pods with
claims (a claim told its node, a local volume given its claim), writes
status and events and holds its Lease; the webhook reads the queues it checks a
new Queue against. The same identities are then refused what the roles do not grant.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from kai_operator_support import (
    bound_pods,
    create_queue,
    delete_queue,
    get_queue,
    gpu_pod,
    operator_config,
    running_operator,
    unique,
    wait_for,
)
from kai_webhook_support import configurations_for, refusal, running_webhook
from kai_webhook_support import installed as installed_configurations
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from kai.api.volumes import SELECTED_NODE_ANNOTATION
from kai.kube.client import ApiError, Kube
from kai.testing.controlplane import ClusterAccess
from kai.testing.fakes import HOSTNAME_LABEL, GpuNode, NodeFactory
from kai.testing.kubeconfig import service_account_kubeconfig

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
SCHEDULER_NAMESPACE = "kai-scheduler"
_COLLECTIONS = {
    "Namespace": "/api/v1/namespaces",
    "ServiceAccount": "/api/v1/namespaces/{namespace}/serviceaccounts",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings",
    "PriorityClass": "/apis/scheduling.k8s.io/v1/priorityclasses",
    "Queue": "/apis/scheduling.run.ai/v2/queues",
}
_LEFT_IN_PLACE = {"Namespace"}
"""Deleting a namespace waits on its finalizers; everything else the manifests create is
removed afterwards, so a later test (the Helm chart's, which checks that nothing of kai's is
installed before it installs) sees the cluster as it was."""
_NOT_APPLIED = {
    "Deployment",
    "Service",
    "PodDisruptionBudget",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
}


@pytest_asyncio.fixture(loop_scope="session")
async def installed(api: client.ApiClient) -> AsyncIterator[list[str]]:
    """manifests/ applied (but `_NOT_APPLIED`); cluster-wide objects removed afterwards."""
    kube = Kube(api)
    created: list[str] = []
    for path in sorted(MANIFESTS.glob("*.yaml")):
        for manifest in yaml.safe_load_all(path.read_text()):
            if not manifest or manifest["kind"] in _NOT_APPLIED:
                continue
            collection = _COLLECTIONS[manifest["kind"]].format(
                namespace=manifest["metadata"].get("namespace", "")
            )
            try:
                await kube.create(collection, manifest)
            except ApiError as error:
                if error.status != 409:
                    raise
            if manifest["kind"] not in _LEFT_IN_PLACE:
                created.append(f"{collection}/{manifest['metadata']['name']}")
    yield created
    for created_path in reversed(created):
        with contextlib.suppress(ApiError):
            await kube.delete(created_path)


async def test_scheduler_runs_with_its_own_least_privilege_role(
    api: client.ApiClient,
    namespace: str,
    gpu_nodes: NodeFactory,
    control_plane: ClusterAccess,
    installed: list[str],
    tmp_path: Path,
) -> None:
    assert any("clusterroles/kai-scheduler" in path for path in installed)
    kubeconfig = await service_account_kubeconfig(
        api,
        namespace=SCHEDULER_NAMESPACE,
        service_account="kai-scheduler",
        server=control_plane.server,
        ca_cert=control_plane.ca_cert,
        path=tmp_path / "kai-scheduler.kubeconfig",
    )
    core = client.CoreV1Api(api)
    kube = Kube(api)
    queue = unique("rbac")
    await create_queue(api, queue)
    storage_class = unique("rbac-late")
    await kube.create(
        "/apis/storage.k8s.io/v1/storageclasses",
        {
            "metadata": {"name": storage_class},
            "provisioner": "csi.example.invalid",
            "volumeBindingMode": "WaitForFirstConsumer",
        },
    )
    node = unique("gpu")
    await gpu_nodes(GpuNode(name=node, gpus=4, gpu_memory_mib=40960))
    # A local volume made beforehand, for a claim of a class without a provisioner.
    local_class, disk = unique("rbac-local"), unique("rbac-disk")
    await kube.create(
        "/apis/storage.k8s.io/v1/storageclasses",
        {
            "metadata": {"name": local_class},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
        },
    )
    at_node = [{"matchExpressions": [{"key": HOSTNAME_LABEL, "operator": "In", "values": [node]}]}]
    await kube.create(
        "/api/v1/persistentvolumes",
        {
            "metadata": {"name": disk},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": local_class,
                "local": {"path": "/mnt/disks/nvme0"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": at_node}},
            },
        },
    )
    try:
        scheduler_config = operator_config(kubeconfig, SCHEDULER_NAMESPACE)
        async with running_operator(scheduler_config) as (operator, _):
            await wait_for("the Lease", _leading(operator))
            await core.create_namespaced_pod(namespace, gpu_pod("whole", queue, gpus=2))
            await core.create_namespaced_pod(
                namespace, gpu_pod("fraction", queue, annotations={"gpu-fraction": "0.5"})
            )
            # A claim to provision: the scheduler reads claims and classes, and tells it the node.
            await kube.create(
                f"/api/v1/namespaces/{namespace}/persistentvolumeclaims",
                {
                    "metadata": {"name": "scratch"},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "1Gi"}},
                        "storageClassName": storage_class,
                    },
                },
            )
            # A claim of the local class: the scheduler gives it the disk (its claimRef).
            await kube.create(
                f"/api/v1/namespaces/{namespace}/persistentvolumeclaims",
                {
                    "metadata": {"name": "local"},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "1Gi"}},
                        "storageClassName": local_class,
                    },
                },
            )
            for name, claim_name in (("claimant", "scratch"), ("local-user", "local")):
                claimant = gpu_pod(name, queue)
                source = client.V1PersistentVolumeClaimVolumeSource(claim_name=claim_name)
                claimant.spec.volumes = [client.V1Volume(name="d", persistent_volume_claim=source)]
                await core.create_namespaced_pod(namespace, claimant)

            async def all_bound() -> bool:
                return len(await bound_pods(api, namespace)) == 4

            await wait_for("the four pods to be bound by the ServiceAccount", all_bound)
            given = await kube.get(f"/api/v1/persistentvolumes/{disk}")
            assert given["spec"]["claimRef"]["name"] == "local"
            claim = await kube.get(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/scratch")
            placed = (await bound_pods(api, namespace))["claimant"]
            assert claim["metadata"]["annotations"][SELECTED_NODE_ANNOTATION] == placed

            async def status_written() -> bool:
                status = (await get_queue(api, queue)).get("status") or {}
                return (status.get("allocated") or {}).get("nvidia.com/gpu") == "2.5"

            await wait_for("queue status written by the ServiceAccount", status_written)

            async def scheduled_event() -> bool:  # events go out after the status writes
                events = (await core.list_namespaced_event(namespace)).items
                return any(
                    e.reason == "Scheduled" and e.reporting_instance == scheduler_config.identity
                    for e in events
                )

            await wait_for("a Scheduled event written by the ServiceAccount", scheduled_event)

        async with await config.new_client_from_config(config_file=str(kubeconfig)) as scheduler:
            as_scheduler = client.CoreV1Api(scheduler)
            with pytest.raises(ApiException) as secrets:
                await as_scheduler.list_namespaced_secret(namespace)
            assert secrets.value.status == 403
            with pytest.raises(ApiException) as pods:  # pods are created only for reservations
                await as_scheduler.create_namespaced_pod(namespace, gpu_pod("sneaky", queue))
            assert pods.value.status == 403
            with pytest.raises(ApiException) as nodes:
                await as_scheduler.patch_node(
                    (await core.list_node()).items[0].metadata.name,
                    {"metadata": {"labels": {"x": "y"}}},
                )
            assert nodes.value.status == 403
    finally:
        await delete_queue(api, queue)
        for path in (
            f"/apis/storage.k8s.io/v1/storageclasses/{storage_class}",
            f"/apis/storage.k8s.io/v1/storageclasses/{local_class}",
            f"/api/v1/persistentvolumes/{disk}",
        ):
            with contextlib.suppress(ApiError):
                await kube.delete(path)


def _leading(operator: Any) -> Any:
    async def check() -> bool:
        return bool(operator.is_leader())

    return check


async def test_webhook_runs_with_its_own_role(
    api: client.ApiClient,
    namespace: str,
    control_plane: ClusterAccess,
    installed: list[str],
    tmp_path: Path,
) -> None:
    assert any("clusterroles/kai-webhook" in path for path in installed)
    kubeconfig = await service_account_kubeconfig(
        api,
        namespace=SCHEDULER_NAMESPACE,
        service_account="kai-webhook",
        server=control_plane.server,
        ca_cert=control_plane.ca_cert,
        path=tmp_path / "kai-webhook.kubeconfig",
    )
    parent = unique("rbac-parent")
    await create_queue(api, parent)
    try:
        async with (
            running_webhook(control_plane, tmp_path, kubeconfig) as webhook,
            installed_configurations(api, configurations_for(webhook, namespace)),
        ):
            orphan = {
                "apiVersion": "scheduling.run.ai/v2",
                "kind": "Queue",
                "metadata": {"name": unique("rbac-orphan")},
                "spec": {"resources": {}, "parentQueue": unique("missing")},
            }
            child = {**orphan, "metadata": {"name": unique("rbac-child")}}
            child["spec"] = {"resources": {}, "parentQueue": parent}
            queues = client.CustomObjectsApi(api)

            async def orphan_refused() -> bool:
                message = await refusal(
                    lambda: queues.create_cluster_custom_object(
                        "scheduling.run.ai", "v2", "queues", orphan, dry_run="All"
                    )
                )
                return message is not None and "does not exist" in message

            # Both answers need the queues listed with the webhook's own token: a listing
            # that fails refuses every Queue, the child's too.
            await wait_for("an orphan Queue refused by the webhook", orphan_refused)
            assert (
                await refusal(
                    lambda: queues.create_cluster_custom_object(
                        "scheduling.run.ai", "v2", "queues", child, dry_run="All"
                    )
                )
                is None
            )
        async with await config.new_client_from_config(config_file=str(kubeconfig)) as hook:
            with pytest.raises(ApiException) as secrets:
                await client.CoreV1Api(hook).list_namespaced_secret(namespace)
            assert secrets.value.status == 403
            with pytest.raises(ApiException) as writes:
                await client.CustomObjectsApi(hook).patch_cluster_custom_object(
                    "scheduling.run.ai",
                    "v2",
                    "queues",
                    parent,
                    {"metadata": {"labels": {"x": "y"}}},
                    _content_type="application/merge-patch+json",  # type: ignore[call-arg]  # not in the stubs
                )
            assert writes.value.status == 403
    finally:
        await delete_queue(api, parent)
