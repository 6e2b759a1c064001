"""kube-apiserver calls `kai webhook` over TLS: bad objects are refused naming the field, fractional
pods are wired to their devices, and a webhook that is down blocks only what it must.

The webhook is its own process with a certificate made by `kai webhook-certs`' code; the
configurations are the shipped ones, scoped to the test's namespace (kai_webhook_support).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from kai_operator_support import (
    POD_GROUPS,
    QUEUES,
    bound_pods,
    create_queue,
    delete_queue,
    ensure_namespace,
    gpu_pod,
    operator_config,
    running_operator,
    told_unschedulable,
    unique,
    wait_for,
)
from kai_webhook_support import (
    KINDS,
    configurations_for,
    installed,
    refusal,
    running_webhook,
)
from kubernetes_asyncio import client

from kai.testing.controlplane import ClusterAccess
from kai.testing.fakes import GpuNode, NodeFactory

CONFIGMAP_ANNOTATION = "runai/shared-gpu-configmap"


def _queue(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": spec,
    }


def _resources() -> dict[str, Any]:
    unlimited = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
    return {"gpu": unlimited, "cpu": unlimited, "memory": unlimited}


async def _create_queue(api: client.ApiClient, body: dict[str, Any], dry_run: bool = False) -> None:
    await _create(api, QUEUES, body, dry_run)


async def _create(
    api: client.ApiClient, kind: tuple[str, str, str], body: dict[str, Any], dry_run: bool
) -> object:
    """Create a cluster-scoped object; with `dry_run`, only ask whether it would be."""
    objects = client.CustomObjectsApi(api)
    if dry_run:
        return await objects.create_cluster_custom_object(*kind, body, dry_run="All")
    return await objects.create_cluster_custom_object(*kind, body)


@contextlib.asynccontextmanager
async def admitting(
    api: client.ApiClient, control_plane: ClusterAccess, directory: Path, namespace: str
) -> AsyncIterator[None]:
    """`kai webhook` running and its configurations in effect for `namespace`."""
    async with (
        running_webhook(control_plane, directory) as webhook,
        installed(api, configurations_for(webhook, namespace)),
    ):
        await _wait_active(api)
        yield


async def _wait_active(api: client.ApiClient) -> None:
    """The API server picks new webhook configurations up within a moment: wait until a dry
    run of a bad Queue is denied by the webhook itself (a dry run leaves nothing behind when
    it is not; a failure to call the webhook is not its answer)."""
    bad = _queue(unique("probe"), resources=_resources(), parentQueue=unique("missing"))

    async def refused() -> bool:
        said = await refusal(lambda: _create_queue(api, bad, dry_run=True))
        return said is not None and "denied the request" in said

    await wait_for("the webhook configurations to take effect", refused, timeout=60)


async def test_bad_queues_and_pod_groups_are_refused_naming_the_field(
    api: client.ApiClient, namespace: str, control_plane: ClusterAccess, tmp_path: Path
) -> None:
    parent, child = unique("parent"), unique("child")
    async with admitting(api, control_plane, tmp_path, namespace):
        try:
            missing = await refusal(
                lambda: _create_queue(
                    api, _queue(unique("orphan"), resources=_resources(), parentQueue="nope")
                )
            )
            assert missing is not None and "spec.parentQueue" in missing and "nope" in missing
            no_resources = await refusal(lambda: _create_queue(api, _queue(unique("bare"))))
            assert no_resources is not None and "spec.resources" in no_resources

            await create_queue(api, parent)  # a good queue is admitted
            await create_queue(api, child, parent=parent)
            cycle = await refusal(
                lambda: client.CustomObjectsApi(api).patch_cluster_custom_object(
                    *QUEUES,
                    parent,
                    {"spec": {"parentQueue": child}},
                    _content_type="application/merge-patch+json",  # type: ignore[call-arg]  # not in the stubs
                )
            )
            assert cycle is not None and "cycle" in cycle and "spec.parentQueue" in cycle

            both = {
                "apiVersion": "scheduling.run.ai/v2alpha2",
                "kind": "PodGroup",
                "metadata": {"name": "both"},
                "spec": {
                    "queue": parent,
                    "minMember": 2,
                    "minSubGroup": 1,
                    "subGroups": [{"name": "a", "minMember": 1}],
                },
            }
            refused = await refusal(
                lambda: client.CustomObjectsApi(api).create_namespaced_custom_object(
                    POD_GROUPS[0], POD_GROUPS[1], namespace, POD_GROUPS[2], both
                )
            )
            assert refused is not None and "spec.minSubGroup" in refused

            # KAI's Topology webhook: an alias used twice is refused (the CRD cannot say so).
            levels = [
                {"nodeLabel": "example.com/zone", "alias": "near"},
                {"nodeLabel": "example.com/rack", "alias": "near"},
            ]
            twice = await refusal(lambda: _create_topology(api, levels, dry_run=True))
            assert twice is not None and "spec.levels[1].alias" in twice and "near" in twice
            levels[1]["alias"] = "rack"
            assert await refusal(lambda: _create_topology(api, levels, dry_run=True)) is None
        finally:
            await delete_queue(api, child)
            await delete_queue(api, parent)


async def _create_topology(
    api: client.ApiClient, levels: list[dict[str, str]], dry_run: bool
) -> object:
    body = {
        "apiVersion": "kai.scheduler/v1alpha1",
        "kind": "Topology",
        "metadata": {"name": unique("topo")},
        "spec": {"levels": levels},
    }
    return await _create(api, ("kai.scheduler", "v1alpha1", "topologies"), body, dry_run)


async def test_a_fraction_pod_gets_its_device_wiring_and_runs_through_gpu_sharing(
    api: client.ApiClient,
    namespace: str,
    gpu_nodes: NodeFactory,
    control_plane: ClusterAccess,
    tmp_path: Path,
) -> None:
    core = client.CoreV1Api(api)
    await ensure_namespace(api)
    queue = unique("frac")
    await create_queue(api, queue)
    await gpu_nodes(GpuNode(name=unique("gpu"), gpus=1, gpu_memory_mib=40960))
    try:
        async with admitting(api, control_plane, tmp_path, namespace):
            pod = gpu_pod("half", queue, annotations={"gpu-fraction": "0.5"})
            created = await core.create_namespaced_pod(namespace, pod)
            prefix = created.metadata.annotations[CONFIGMAP_ANNOTATION]
            container = created.spec.containers[0]
            env = {item.name: item for item in container.env or []}
            assert env["NVIDIA_VISIBLE_DEVICES"].value_from.config_map_key_ref.name == (
                f"{prefix}-0"
            )
            env_from = [source.config_map_ref.name for source in container.env_from or []]
            assert f"{prefix}-0-evar" in env_from
            volumes = {
                volume.config_map.name
                for volume in created.spec.volumes or []
                if volume.config_map is not None
            }
            assert f"{prefix}-0" in volumes

            config = operator_config(control_plane.kubeconfig, namespace)
            async with running_operator(config):

                async def bound() -> bool:
                    return "half" in await bound_pods(api, namespace)

                await wait_for("the fraction pod to be bound", bound)

                async def wired() -> bool:
                    names = {
                        item.metadata.name
                        for item in (await core.list_namespaced_config_map(namespace)).items
                    }
                    return {f"{prefix}-0", f"{prefix}-0-evar"} <= names

                # The ConfigMaps the injected env and volume name are the ones the binder makes.
                await wait_for("the device ConfigMaps the pod references", wired)
                evar = await core.read_namespaced_config_map(f"{prefix}-0-evar", namespace)
                assert evar.data["GPU_PORTION"] == "0.5"
    finally:
        await delete_queue(api, queue)


def _apart_from(name: str, queue: str, app: str) -> client.V1Pod:
    """A one-GPU pod labelled `app` that must not share a node with another pod labelled so."""
    pod = gpu_pod(name, queue, 1, labels={"app": app})
    term = client.V1PodAffinityTerm(
        label_selector=client.V1LabelSelector(match_labels={"app": app}),
        topology_key="kubernetes.io/hostname",
    )
    pod.spec.affinity = client.V1Affinity(
        pod_anti_affinity=client.V1PodAntiAffinity(
            required_during_scheduling_ignored_during_execution=[term]
        )
    )
    return pod


async def test_replicas_that_avoid_each_other_spread_and_a_claim_kai_cannot_keep_is_warned_of(
    api: client.ApiClient,
    namespace: str,
    gpu_nodes: NodeFactory,
    control_plane: ClusterAccess,
    tmp_path: Path,
) -> None:
    """Three replicas that must not share a node, two nodes: two bind apart, the third
    waits told why, a pod without the term packs beside them. A pod made then, which
    avoids the web pods of the namespaces labelled so (this test's, labelled), waits told
    why, and binds once the label is taken off the namespace. A pod with DRA claims, which kai does not
    allocate, is warned of at creation and waits with UnhonouredConstraint."""
    core = client.CoreV1Api(api)
    await ensure_namespace(api)
    queue = unique("apart")
    await create_queue(api, queue)
    nodes = [unique("gpu"), unique("gpu")]
    for name in nodes:
        await gpu_nodes(GpuNode(name=name, gpus=4))
    team = unique("team")
    await core.patch_namespace(namespace, {"metadata": {"labels": {"kai-test/team": team}}})
    replicas = ("web-0", "web-1", "web-2")
    try:
        async with admitting(api, control_plane, tmp_path, namespace):
            for name in replicas:
                _, _, headers = await core.create_namespaced_pod_with_http_info(
                    namespace, _apart_from(name, queue, "web")
                )
                assert "Warning" not in headers  # kai keeps these terms
            claiming = gpu_pod("claiming", queue, 1)
            claiming.spec.resource_claims = [
                client.V1PodResourceClaim(name="gpu", resource_claim_template_name="one-gpu")
            ]
            _, _, headers = await core.create_namespaced_pod_with_http_info(namespace, claiming)
            assert "spec.resourceClaims" in headers.get("Warning", "")
            await core.create_namespaced_pod(namespace, gpu_pod("plain", queue, 1))
            config = operator_config(control_plane.kubeconfig, namespace)
            async with running_operator(config):

                async def two_apart_and_plain() -> bool:
                    bound = await bound_pods(api, namespace)
                    return "plain" in bound and len(set(replicas) & set(bound)) == 2

                await wait_for("two replicas and the plain pod to be bound", two_apart_and_plain)
                bound = await bound_pods(api, namespace)
                [waiting] = set(replicas) - set(bound)
                assert sorted(bound[name] for name in replicas if name in bound) == sorted(nodes)
                by_label = gpu_pod("by-label", queue, 1)
                by_label.spec.affinity = client.V1Affinity(
                    pod_anti_affinity=client.V1PodAntiAffinity(
                        required_during_scheduling_ignored_during_execution=[
                            client.V1PodAffinityTerm(
                                label_selector=client.V1LabelSelector(match_labels={"app": "web"}),
                                namespace_selector=client.V1LabelSelector(
                                    match_labels={"kai-test/team": team}
                                ),
                                topology_key="kubernetes.io/hostname",
                            )
                        ]
                    )
                )
                _, _, headers = await core.create_namespaced_pod_with_http_info(namespace, by_label)
                assert "Warning" not in headers

                async def told() -> bool:
                    leave_open = "inter-pod affinity terms leave open"
                    return (
                        await told_unschedulable(api, namespace, waiting, leave_open)
                        and await told_unschedulable(api, namespace, "by-label", leave_open)
                        and await told_unschedulable(
                            api, namespace, "claiming", "UnhonouredConstraint", "resourceClaims"
                        )
                    )

                await wait_for("the waiting pods to be told why", told)
                assert "by-label" not in await bound_pods(api, namespace)
                await core.patch_namespace(
                    namespace, {"metadata": {"labels": {"kai-test/team": None}}}
                )

                async def by_label_bound() -> bool:
                    return "by-label" in await bound_pods(api, namespace)

                await wait_for("by-label bound once its namespace is not selected", by_label_bound)
                assert "claiming" not in await bound_pods(api, namespace)
    finally:
        await delete_queue(api, queue)


async def test_a_stopped_webhook_blocks_only_kai_scheduler_pods_and_only_when_told_to(
    api: client.ApiClient, namespace: str, control_plane: ClusterAccess, tmp_path: Path
) -> None:
    core = client.CoreV1Api(api)
    admission = client.AdmissionregistrationV1Api(api)
    queue = unique("down")

    async def kai_pod_refused() -> bool:
        pod = gpu_pod(unique("kai"), queue)
        return (
            await refusal(lambda: core.create_namespaced_pod(namespace, pod, dry_run="All"))
            is not None
        )

    async with running_webhook(control_plane, tmp_path) as webhook:
        configurations = configurations_for(webhook, namespace, failure_policy="Fail")
        webhook.stop()
        assert webhook.child.exit_code() is not None
        async with installed(api, configurations):
            # Fail: a kai-scheduler pod is refused while the webhook is down...
            await wait_for("a kai-scheduler pod refused by the stopped webhook", kai_pod_refused)
            # ... and a pod of another scheduler never reaches it, or it would be refused too.
            other = gpu_pod("other", queue, annotations={"gpu-fraction": "0.5"})
            other.spec.scheduler_name = "default-scheduler"
            assert await refusal(lambda: core.create_namespaced_pod(namespace, other)) is None
            stored = await core.read_namespaced_pod("other", namespace)
            assert CONFIGMAP_ANNOTATION not in (stored.metadata.annotations or {})

            # Ignore, the only change to the same configurations: nothing is blocked.
            for configuration in configurations:
                name = configuration["metadata"]["name"]
                hooks = [
                    {"name": hook["name"], "failurePolicy": "Ignore"}
                    for hook in configuration["webhooks"]
                ]
                kind = KINDS[configuration["kind"]]
                await getattr(admission, f"patch_{kind}")(name, {"webhooks": hooks})

            async def kai_pod_admitted() -> bool:
                return not await kai_pod_refused()

            await wait_for("kai-scheduler pods admitted under Ignore", kai_pod_admitted)
            assert (
                await refusal(
                    lambda: core.create_namespaced_pod(namespace, gpu_pod("kai-admitted", queue))
                )
                is None
            )
