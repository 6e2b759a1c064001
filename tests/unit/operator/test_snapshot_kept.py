"""A snapshot builder that keeps last cycle's parses builds what a new builder builds.

The builder takes an object that is the very one it parsed last cycle as parsed
(`ParseMemo.kept`): the watch cache replaces an object that changes, and its copies say
which keys changed (the test's stores note each change as the live cache does). Over runs of
random changes to the cache (pods created, grouped, bound, finished, deleted, some
invalid; PodGroups created, changed and deleted, some invalid; a queue breaking and
mending; priority classes changing; reservation pods, counted or not as shares of their
devices come and go; the overlay's plans, assumed
binds and held groups coming and going; pods' volume claims made, bound, told a node and
deleted; host ports asked and given up; ConfigMaps pods read made and deleted), a
long-lived builder's snapshot equals the
snapshot a builder that never saw the cluster builds from the same view and overlay.
"""

from __future__ import annotations

import copy
import dataclasses
import random
from collections import Counter
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

from kai.api.host_ports import ports_in_use
from kai.api.volumes import BIND_COMPLETED_ANNOTATION, SELECTED_NODE_ANNOTATION
from kai.engine.model import SetAside, Snapshot
from kai.engine.prerequisites import MISSING_CONFIG_MAPS, VOLUME_CLAIM_NOT_READY
from kai.grouping import PodGroupPlan
from kai.operator.cache import ClusterView
from kai.operator.snapshot import Assumed, Overlay, SnapshotBuilder
from tests.unit.api.logged_store import LoggedDict
from tests.unit.engine.builders import told as told_since
from tests.unit.operator.test_operator_snapshot import _node

NOW = datetime(2026, 1, 1, tzinfo=UTC)
RESERVATIONS = "kai-resource-reservation"
NODES = ("n1", "n2", "n3")


def _local_volume(node: str) -> dict[str, Any]:
    at_node = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    required = {"nodeSelectorTerms": [at_node]}
    return {"metadata": {"name": f"disk-{node}"}, "spec": {"nodeAffinity": {"required": required}}}


VOLUMES = MappingProxyType({f"disk-{node}": _local_volume(node) for node in NODES})
CLASSES = MappingProxyType(
    {
        "late": {
            "metadata": {"name": "late"},
            "provisioner": "csi.example.com",
            "volumeBindingMode": "WaitForFirstConsumer",
        }
    }
)


def _queue(name: str, version: int, weight: object = 1) -> dict[str, Any]:
    unlimited = {"quota": -1, "limit": -1, "overQuotaWeight": weight}
    return {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": str(version)},
        "spec": {"resources": {"gpu": unlimited, "cpu": unlimited, "memory": unlimited}},
    }


def _group(
    name: str, version: int, min_member: object, priority_class: str | None
) -> dict[str, Any]:
    spec: dict[str, Any] = {"queue": "q", "minMember": min_member}
    if priority_class is not None:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}",
                     "resourceVersion": str(version)},
        "spec": spec,
    }  # fmt: skip


def _pod(
    name: str, version: int, group: str | None, node: str | None, gpus: object, phase: str
) -> dict[str, Any]:
    annotations = {"pod-group-name": group} if group else {}
    spec: dict[str, Any] = {
        "schedulerName": "kai-scheduler",
        "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": gpus},
                                                   "limits": {"nvidia.com/gpu": gpus}}}],
    }  # fmt: skip
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}",
                     "resourceVersion": str(version), "annotations": annotations,
                     "labels": {"kai.scheduler/queue": "q"}},
        "spec": spec,
        "status": {"phase": phase},
    }  # fmt: skip


def _namespace(labelled: bool) -> dict[str, Any]:
    return {"metadata": {"name": "team", "labels": {"team": "a"} if labelled else {}}}


def _reservation(name: str, node: str, device: str) -> dict[str, Any]:
    found = _pod(name, 1, None, node, "1", "Running")
    found["metadata"]["namespace"] = RESERVATIONS
    found["metadata"]["labels"] = {"runai-gpu-group": device}
    return found


class _Cache:
    """The watch cache's stores: a changed object is a new object."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.version = 1
        self.nodes = LoggedDict({name: _node(name, 8) for name in NODES})
        self.queues = LoggedDict({"q": _queue("q", 1)})
        self.groups = LoggedDict()
        self.pods = LoggedDict()
        self.classes: dict[str, dict[str, Any]] = {}
        self.made = 0
        self.devices: list[tuple[str, str]] = []  # (node, device) of each reservation pod
        self.claims: dict[str, dict[str, Any]] = {}
        self.config_maps: dict[str, dict[str, Any]] = {}
        self.namespaces: dict[str, dict[str, Any]] = {"team": _namespace(labelled=False)}

    def step(self) -> Overlay:
        rng = self.rng
        self.version += 1
        for _ in range(rng.randint(0, 3)):
            self._create()
        for key in rng.sample(sorted(self.pods), min(len(self.pods), rng.randint(0, 3))):
            self._change_pod(key)
        for key in rng.sample(sorted(self.groups), min(len(self.groups), rng.randint(0, 1))):
            name = self.groups[key]["metadata"]["name"]
            if rng.random() < 0.2:
                del self.groups[key]
            else:
                self.groups[key] = _group(name, self.version, *self._group_fields())
        if rng.random() < 0.1:
            self.queues["q"] = _queue("q", self.version, rng.choice((1, 2, "heavy")))  # bad: broken
        if rng.random() < 0.1:
            self.classes = (
                {}
                if self.classes
                else {"high": {"metadata": {"name": "high", "uid": "uid-high",
                                            "resourceVersion": "1"}, "value": 1000}}
            )  # fmt: skip
        if rng.random() < 0.15:
            device, node = f"dev-{self.version}", rng.choice(NODES)
            self.pods[f"{RESERVATIONS}/r-{self.version}"] = _reservation(
                f"r-{self.version}", node, device
            )
            self.devices.append((node, device))
        for _ in range(rng.randint(0, 2)):
            self._change_claim()
        if rng.random() < 0.3:  # a ConfigMap some pods read is made, or deleted
            key = f"team/settings-{rng.randint(0, 2)}"
            if self.config_maps.pop(key, None) is None:
                self.config_maps[key] = {"metadata": {"name": key[5:], "namespace": "team"}}
        if rng.random() < 0.2:  # the namespace is labelled, or the label taken off
            labelled = bool(self.namespaces["team"]["metadata"]["labels"])
            self.namespaces = {"team": _namespace(labelled=not labelled)}
        if rng.random() < 0.05:
            self.pods.store.relist()  # a watch expired: every object is a new one
        return self._overlay()

    def _change_claim(self) -> None:
        """A claim of a pod made (of a class that provisions on first use), bound to a
        node's local volume, told a node, or deleted: each a new object."""
        rng = self.rng
        name = f"c{rng.randint(1, max(self.made, 1))}"
        key = f"team/{name}"
        if key in self.claims and rng.random() < 0.2:
            del self.claims[key]
            return
        annotations: dict[str, str] = {}
        spec: dict[str, Any] = {"storageClassName": "late"}
        choice = rng.random()
        if choice < 0.3:
            annotations[BIND_COMPLETED_ANNOTATION] = "yes"
            spec["volumeName"] = f"disk-{rng.choice(NODES)}"
        elif choice < 0.5:
            annotations[SELECTED_NODE_ANNOTATION] = rng.choice(NODES)
        self.claims[key] = {
            "metadata": {"name": name, "namespace": "team", "annotations": annotations},
            "spec": spec,
        }

    def _group_fields(self) -> tuple[object, str | None]:
        rng = self.rng
        return rng.choice((1, 1, 2, "many")), rng.choice((None, None, "high"))

    def _create(self) -> None:
        rng = self.rng
        self.made += 1
        name = f"p{self.made}"
        group = f"g{self.made}" if rng.random() < 0.8 else None
        if group is not None:
            self.groups[f"team/{group}"] = _group(group, self.version, *self._group_fields())
        gpus = rng.choice(("1", "1", "2", "lots"))
        made = _pod(name, self.version, group, None, gpus, "Pending")
        if rng.random() < 0.2:  # it reads a ConfigMap: while pending, it waits for it
            source = {"configMapRef": {"name": f"settings-{rng.randint(0, 2)}"}}
            made["spec"]["containers"][0]["envFrom"] = [source]
        if rng.random() < 0.2:  # it avoids the web pods of the namespaces labelled team=a
            term = {"labelSelector": {"matchLabels": {"app": "web"}},
                    "namespaceSelector": {"matchLabels": {"team": "a"}},
                    "topologyKey": "kubernetes.io/hostname"}  # fmt: skip
            required = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
            made["spec"]["affinity"] = {"podAntiAffinity": required}
        if rng.random() < 0.15:  # a host port: every node offers it while a pod asks it
            port = {"containerPort": 80, "hostPort": rng.choice((8080, 9090))}
            made["spec"]["containers"][0]["ports"] = [port]
        if rng.random() < 0.4:  # its claim may come before it, after it, or never
            volume = {"name": "data", "persistentVolumeClaim": {"claimName": f"c{self.made}"}}
            made["spec"]["volumes"] = [volume]
        self.pods[f"team/{name}"] = made

    def _change_pod(self, key: str) -> None:
        rng = self.rng
        found = self.pods[key]
        if rng.random() < 0.25:
            del self.pods[key]
            return
        changed = copy.deepcopy(found)
        changed["metadata"]["resourceVersion"] = str(self.version)
        if not changed["spec"].get("nodeName"):
            changed["spec"]["nodeName"] = rng.choice(NODES)
            changed["status"]["phase"] = "Running"
            if self.devices and rng.random() < 0.4:  # a share of a device: its reservation
                node, device = rng.choice(self.devices)  # pod is no longer counted
                changed["spec"]["nodeName"] = node
                changed["metadata"]["labels"]["runai-gpu-group"] = device
                changed["metadata"]["annotations"]["gpu-fraction"] = "0.5"
                del changed["spec"]["containers"][0]["resources"]
        else:
            changed["status"]["phase"] = rng.choice(("Succeeded", "Failed", "Running"))
        self.pods[key] = changed

    def _overlay(self) -> Overlay:
        """What the scheduler lays over the cache: plans for some ungrouped pods, assumed
        binds for some pending ones, and a held group."""
        rng = self.rng
        plans: dict[str, PodGroupPlan] = {}
        assumed: dict[str, Assumed] = {}
        for key, found in sorted(self.pods.items()):
            if key.startswith(RESERVATIONS):
                continue
            annotated = found["metadata"]["annotations"].get("pod-group-name")
            if not annotated and rng.random() < 0.5:
                name = f"planned-{found['metadata']['name']}"
                manifest = _group(name, 1, 1, None)
                plans[key] = PodGroupPlan(name, "team", manifest, {"pod-group-name": name}, {})
            elif not found["spec"].get("nodeName") and rng.random() < 0.3:
                assumed[key] = Assumed(rng.choice(NODES), ())
        held: dict[str, SetAside] = {}
        if self.groups and rng.random() < 0.3:
            key = rng.choice(sorted(self.groups))
            held[key] = SetAside(key, "q", "BindBackoff", "binding keeps failing")
        return Overlay(plans, assumed, held)

    def view(self) -> ClusterView:
        """The stores as the live cache copies them: each copy says what changed."""
        empty: MappingProxyType[str, Any] = MappingProxyType({})
        return ClusterView(
            self.nodes.store.copy(), self.pods.store.copy(), self.queues.store.copy(),
            self.groups.store.copy(), MappingProxyType(dict(self.classes)), empty, self.version,
            claims=MappingProxyType(dict(self.claims)), volumes=VOLUMES, storage_classes=CLASSES,
            config_maps=MappingProxyType(dict(self.config_maps)),
            namespaces=MappingProxyType(dict(self.namespaces)),
        )  # fmt: skip


def _plain(view: ClusterView) -> ClusterView:
    """Copies that say nothing of what changed."""
    return dataclasses.replace(
        view,
        nodes=MappingProxyType(dict(view.nodes)),
        pods=MappingProxyType(dict(view.pods)),
        queues=MappingProxyType(dict(view.queues)),
        pod_groups=MappingProxyType(dict(view.pod_groups)),
    )


def test_a_builder_that_keeps_parses_builds_what_a_new_builder_builds() -> None:
    kept_any = False
    told = Counter[str]()
    ports_offered = Counter[str]()  # cycles with host ports on offer, or none
    claims_read = Counter[str]()  # pods held to nodes by their claims, or waiting for them
    selecting = Counter[bool]()  # pods whose term selects their namespace by its label, or not
    for seed in range(25):
        cache = _Cache(random.Random(seed))
        builder = SnapshotBuilder(RESERVATIONS)
        last: Snapshot | None = None
        for _ in range(30):
            overlay = cache.step()
            view = cache.view()
            built = builder.build(view, overlay, NOW)
            fresh = SnapshotBuilder(RESERVATIONS).build(_plain(view), overlay, NOW)
            assert built == fresh, seed
            kept_any = kept_any or bool(built.pods)
            ports_offered["some" if ports_in_use(built.pods) else "none"] += 1
            claims_read.update("held" for pod in built.pods if pod.placement.volume_terms)
            claims_read.update(pod.waits_for.reason for pod in built.pods if pod.waits_for)
            selecting.update(
                "team" in (term.namespaces or ()) for pod in built.pods for term in pod.pod_terms
            )
            if last is not None:
                told.update(_assert_told_exactly(last, built))
            last = built
    assert kept_any
    assert claims_read["held"] > 100, claims_read
    assert claims_read[VOLUME_CLAIM_NOT_READY] > 100, claims_read
    assert claims_read[MISSING_CONFIG_MAPS] > 50, claims_read
    assert ports_offered["some"] > 100 and ports_offered["none"] > 20, ports_offered
    assert selecting[True] > 100 and selecting[False] > 100, selecting
    # Pods told in the cycles without held groups nor any the cycle before, reservation
    # pods or not (while those were left out: 89 of 725 cycles).
    assert told["pods"] > 400 and told["pod_groups"] > 50 and told["nodes"] > 500


def _assert_told_exactly(last: Snapshot, built: Snapshot) -> list[str]:
    """What the builder says changed since its last snapshot is what did, by identity."""
    exact = told_since(last, built).changes
    assert exact is not None and built.changes is not None
    found = []
    for kind in ("pods", "pod_groups", "nodes"):
        account = getattr(built.changes, kind)
        if account is not None:
            assert account.since is getattr(last, kind) and account.now is getattr(built, kind)
            assert dict(account.changed) == dict(getattr(exact, kind).changed), kind
            found.append(kind)
    return found
