"""Carrying out a cycle's decisions: binds through `pods/binding`, evictions as deletions.

Bindings are grouped by gang, with at most `concurrency` requests in flight
overall. Before any bind of a gang is sent, the binder asks the cycle's grouping
writes what each binding must carry: a pod grouped in this cycle waits for its
PodGroup (and its sub-group label patch) to be written, and its `pod-group-name`
annotation rides on the Binding, which the API server copies onto the pod in the
same write. A pod whose grouping write failed is not bound, and when the pods left
would not make the gang whole (`subgroups.holds`, counting its pods already on
nodes) none of the gang is bound this cycle. Fractional pods get their reservation
pod, ConfigMaps and group label first (`gpu_sharing`); a pod's claims still to be
provisioned are told its node first (`kai.api.volumes`), and each of its claims that
takes a volume made beforehand gets one of the node's free volumes, whose `claimRef` is
written first, conditioned on the volume's resourceVersion (`kai.api.static_volumes`):
a volume another writer took meanwhile refuses the bind. Leadership is checked
inside the concurrency slot right before each write of a bind, so a deposed leader
sends none once it knows.

The server's answer decides what the pod is afterwards:
- 201: bound; held on its node (`Held`) until the watch cache shows it.
- a refusal (403, 422, a webhook, a connection never made): the pod is still
  unbound, its group label is taken back and its group backs off (`backoff`).
- 409 is not always "already bound": the server also answers it for a uid
  mismatch (a newer pod of the same name), scheduling gates and a pod being
  deleted. The pod is read to decide: bound to any node means already bound;
  gone or replaced means dropped, with no backoff; still unbound is a refusal.
- no answer, or a 5xx, after the request was sent: it may have committed. The pod
  stays held on the node with its shared devices and the same Binding is sent
  again in later cycles while a read shows the pod unbound (a repeat is safe: the
  server answers 409 if the first one committed), until an answer settles it.
  After `UNKNOWN_ANSWERS_LIMIT` unknown answers a pod still read unbound counts as
  refused, so a bind that never took does not hold its capacity for ever.
Each bind is isolated: an unexpected exception is logged with the pod and counts
as a refusal (or as an unknown answer once the Binding may have been sent); every
other bind goes on and is reported.

A pod bound by a pool's shard is then labelled with the pool, when it does not carry
it already (KAI's scheduler does the same once its BindRequest is created): a
Binding carries annotations only, so it is a patch after the bind, with the pod's
uid as precondition. Its failure is logged and leaves the bind as it is.

Evictions follow KAI's evictor: the pod gets the `DisruptionTarget` condition,
then is deleted; each eviction is isolated the same way.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from fractions import Fraction
from typing import Any, NamedTuple

import structlog

from kai.api.shards import Shard
from kai.api.static_volumes import FreeVolume, StaticClaim, choose
from kai.api.volumes import (
    SELECTED_NODE_ANNOTATION,
    ClaimsReading,
    VolumeObjects,
    claim_reference,
    names_claims,
    pod_claims,
)
from kai.engine.cycle import Binding
from kai.engine.evictions.decisions import Eviction
from kai.engine.model import Node, Pod, PodGroup
from kai.engine.subgroups import holds
from kai.kube.client import ApiError, Kube
from kai.operator.backoff import BindBackoff
from kai.operator.events import (
    EVICTED,
    NORMAL,
    SCHEDULED,
    EventRecorder,
    InvolvedObject,
)
from kai.operator.gpu_sharing import GpuSharing
from kai.operator.snapshot import Assumed

log = structlog.get_logger(__name__)

STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
UNKNOWN_ANSWERS_LIMIT = 3
"""Unknown answers (timeouts, 5xx) after which a bind whose pod still reads unbound has failed."""
_CONFLICT = 409
_GONE = 404
BOUND_BY_CONTROLLER_ANNOTATION = "pv.kubernetes.io/bound-by-controller"
"""Set on a volume whose `claimRef` a controller wrote, as kube-scheduler's binder does."""

Annotations = Callable[[str], Awaitable[Mapping[str, str] | None]]
"""Pod key -> the annotations its Binding carries, once it may be bound; None: not this cycle."""


@dataclass(frozen=True)
class SentBind:
    """One Binding to send, and what to undo or back off if it fails."""

    pod: Pod
    queue: str
    node: str
    gpus: Fraction
    gpu_groups: tuple[str, ...]
    annotations: Mapping[str, str]
    claims: tuple[str, ...] = ()
    """Claims to tell the node before the bind (`kai.api.volumes`: their volume is made there)."""
    volumes: tuple[tuple[StaticClaim, FreeVolume], ...] = ()
    """Claims given a volume made beforehand, whose `claimRef` is written before the bind."""
    refusal: str = ""
    """Why the bind is refused before anything is written (no volume for a claim)."""
    unknown_answers: int = 0
    """How many answers so far left it unknown whether it committed; 0: not sent yet."""

    @property
    def placement(self) -> Assumed:
        return Assumed(self.node, self.gpu_groups)


@dataclass(frozen=True)
class Held:
    """A pod this process put on a node, laid over the cache until the watch shows it."""

    key: str
    placement: Assumed
    resend: SentBind | None = None
    """While it is unknown whether the bind committed: the bind to send again."""


@dataclass
class BindReport:
    bound: dict[str, Assumed] = field(default_factory=dict)
    """Pod key -> where it was bound (this cycle's binds, and earlier ones now known to be)."""
    held: dict[str, Held] = field(default_factory=dict)
    """Pod uid -> what to lay over the cache: bound, found bound, or outcome unknown."""
    failed: dict[str, str] = field(default_factory=dict)
    """Pod key -> why its bind was refused."""
    dropped: set[str] = field(default_factory=set)
    """Pod keys deleted or replaced before their bind: nothing to hold or back off."""
    held_back: dict[str, list[str]] = field(default_factory=dict)
    """Group key -> its pods not bound this cycle: the ones ready would not make it whole."""
    skipped_not_leader: int = 0

    @property
    def unknown(self) -> list[str]:
        return [held.key for held in self.held.values() if held.resend is not None]


class _State(Enum):
    GONE = "gone"  # deleted, being deleted unbound, or replaced by a newer pod of the name
    BOUND = "bound"
    UNBOUND = "unbound"
    UNREADABLE = "unreadable"


@dataclass(frozen=True)
class _Reading:
    state: _State
    node: str = ""
    error: str = ""


class Binder:
    def __init__(
        self,
        kube: Kube,
        sharing: GpuSharing,
        backoff: BindBackoff,
        events: EventRecorder,
        concurrency: int,
        is_leader: Callable[[], bool],
        shard: Shard | None = None,
    ) -> None:
        self._kube = kube
        self._shard = shard or Shard()
        self._sharing = sharing
        self._backoff = backoff
        self._events = events
        self._slots = asyncio.Semaphore(concurrency)
        self._given: dict[str, str] = {}
        """Volume name -> its resourceVersion when a bind was given it: the cache may show
        it free at that version until it shows the write of its `claimRef`."""
        self._is_leader = is_leader

    async def bind(
        self,
        bindings: Sequence[Binding],
        pods: Mapping[str, Pod],
        groups: Mapping[str, PodGroup],
        manifests: Mapping[str, Mapping[str, Any]],
        reservations: Mapping[str, Mapping[str, Any]],
        annotations: Annotations,
        resends: Sequence[SentBind] = (),
        after: asyncio.Event | None = None,
        answered: asyncio.Event | None = None,
        volumes: VolumeObjects | None = None,
        nodes: Sequence[Node] = (),
    ) -> BindReport:
        """Bind every pod of `bindings` gang by gang, and settle earlier binds of unknown outcome.

        With `after` (the binds of the cycle before, still going out), every bind is made
        ready and sent once it is set: the first go out at once, none before. `answered`
        is set once the first bind is settled, or when there was none to make.
        """
        gangs: dict[str, list[Binding]] = defaultdict(list)
        for binding in bindings:
            gangs[pods[binding.pod].group].append(binding)
        report = BindReport()
        readings = {
            binding.pod: _reading(manifests.get(binding.pod), volumes) for binding in bindings
        }
        volume_work = self._volume_work(bindings, readings, volumes, nodes)

        async def send(job: SentBind) -> None:
            try:
                await self._send(job, manifests, reservations, report, after)
            finally:
                if answered is not None:
                    answered.set()

        work = [
            self._gang(key, members, pods, groups.get(key), annotations, volume_work, send, report)
            for key, members in gangs.items()
        ]
        work += [send(job) for job in resends]
        for outcome in await asyncio.gather(*work, return_exceptions=True):
            if isinstance(outcome, BaseException):  # each bind catches its own; a last net
                log.error("bind work failed", exc_info=outcome)
        if answered is not None:
            answered.set()
        return report

    def _volume_work(
        self,
        bindings: Sequence[Binding],
        readings: Mapping[str, ClaimsReading],
        volumes: VolumeObjects | None,
        nodes: Sequence[Node],
    ) -> dict[str, _VolumeWork]:
        """Pod key -> its claims to tell the node, and the free volumes its claims take on
        its node (`static_volumes.choose`): a node's volumes go to the cycle's pods there in
        turn, each volume to one claim, and none the cache still shows as it was when an
        earlier bind was given it."""
        work = {key: _VolumeWork(reading.to_provision) for key, reading in readings.items()}
        asking = [binding for binding in bindings if readings[binding.pod].static]
        if volumes is None or not asking:
            return work
        on_node = volumes.static.by_node(nodes)
        free = {volume.name: volume for found in on_node.values() for volume in found}
        self._given = {
            name: version
            for name, version in self._given.items()
            if name in free and free[name].resource_version == version
        }
        taken = set(self._given)
        # claim key -> (node, volume): two pods of the cycle may share a claim
        placed: dict[str, tuple[str, FreeVolume]] = {}
        for binding in asking:
            claims = [c for c in readings[binding.pod].static if c.key not in placed]
            chosen = choose(claims, on_node.get(binding.node, []), taken)
            shared = [placed[c.key] for c in readings[binding.pod].static if c.key in placed]
            told = work[binding.pod].claims
            if chosen is None or any(node != binding.node for node, _ in shared):
                why = f"no free volume made beforehand on {binding.node} for every claim of the pod"
                work[binding.pod] = _VolumeWork(told, refusal=why)
                continue
            placed |= {key: (binding.node, volume) for key, volume in chosen.items()}
            self._given |= {volume.name: volume.resource_version for volume in chosen.values()}
            work[binding.pod] = _VolumeWork(told, tuple((c, chosen[c.key]) for c in claims))
        return work

    async def _gang(
        self,
        key: str,
        members: Sequence[Binding],
        pods: Mapping[str, Pod],
        group: PodGroup | None,
        annotations: Annotations,
        volumes: Mapping[str, _VolumeWork],
        send: Callable[[SentBind], Awaitable[None]],
        report: BindReport,
    ) -> None:
        """Decide the gang's binds before sending any: all that are ready, or none."""
        carried = await asyncio.gather(*(_carried(annotations, b.pod) for b in members))
        queue = group.queue if group else ""
        jobs = [
            SentBind(
                pods[b.pod],
                queue,
                b.node,
                b.gpus,
                b.gpu_groups,
                labels,
                *volumes[b.pod],
            )
            for b, labels in zip(members, carried, strict=True)
            if labels is not None
        ]
        for job in jobs:
            if job.refusal:  # nothing written for it: backed off, no device to give back
                self._backoff_failed(job, job.refusal, report)
        ready = [job for job in jobs if not job.refusal]
        if len(ready) < len(members):
            on_nodes = [p for p in pods.values() if p.group == key and p.phase.occupies_node]
            if group is None or not holds(group, on_nodes + [job.pod for job in ready]):
                report.held_back[key] = [b.pod for b in members]
                log.info(
                    "gang not bound this cycle: the pods whose grouping was written "
                    "and whose volumes were found would not make it whole",
                    group=key,
                    ready=len(ready),
                    placed=len(members),
                )
                return
        await asyncio.gather(*(send(job) for job in ready))

    async def _send(
        self,
        job: SentBind,
        manifests: Mapping[str, Mapping[str, Any]],
        reservations: Mapping[str, Mapping[str, Any]],
        report: BindReport,
        after: asyncio.Event | None,
    ) -> None:
        """One bind, then the shard's pool label on the pod if the bind is known to be made."""
        await self._bind_one(job, manifests, reservations, report, after)
        if job.pod.key in report.bound:
            await self._label_pool(job.pod, manifests.get(job.pod.key) or {})

    async def _label_pool(self, pod: Pod, manifest: Mapping[str, Any]) -> None:
        labels = self._shard.labels_on_bind(manifest)
        if not labels:
            return
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}"
        async with self._slots:
            try:
                await self._kube.merge_patch(path, {"metadata": {"uid": pod.uid, "labels": labels}})
            except Exception as error:  # the pod is bound all the same
                log.warning("pool label not written on a bound pod", pod=pod.key, error=str(error))

    async def _bind_one(
        self,
        job: SentBind,
        manifests: Mapping[str, Mapping[str, Any]],
        reservations: Mapping[str, Mapping[str, Any]],
        report: BindReport,
        after: asyncio.Event | None,
    ) -> None:
        """One bind, start to finish; whatever goes wrong stays with this pod."""
        posted = False
        try:
            async with self._slots:
                if after is not None:
                    await after.wait()
                if not self._still_leading(job, report):
                    return
                if job.unknown_answers == 0 and job.gpu_groups:
                    try:
                        await self._prepare_sharing(job, manifests, reservations)
                    except ApiError as error:
                        await self._refused(job, f"{error.status} {error.reason}", report)
                        return
                elif job.unknown_answers > 0 and not await self._still_to_send(job, report):
                    return
                if job.unknown_answers == 0 and (job.claims or job.volumes):
                    try:
                        await self._take_volumes(job)
                        await self._select_node(job)
                    except ApiError as error:
                        await self._refused(job, f"{error.status} {error.reason}", report)
                        return
                if not self._still_leading(job, report):
                    return
                posted = True
                try:
                    await self._post_binding(job)
                except ApiError as error:
                    await self._answered(job, error, report)
                    return
            self._bound(job, job.node, report)
        except Exception:  # a bug in one bind must not stop the others
            log.exception("bind went wrong", pod=job.pod.key, node=job.node)
            if posted:
                self._unknown(job, "unexpected error after sending", report)
            else:
                await self._refused(job, "unexpected error", report)

    def _still_leading(self, job: SentBind, report: BindReport) -> bool:
        if self._is_leader():
            return True
        report.skipped_not_leader += 1
        if job.unknown_answers > 0:  # may have committed: keep holding it for a next term
            report.held[job.pod.uid] = Held(job.pod.key, job.placement, job)
        return False

    async def _prepare_sharing(
        self,
        job: SentBind,
        manifests: Mapping[str, Mapping[str, Any]],
        reservations: Mapping[str, Mapping[str, Any]],
    ) -> None:
        portion = Fraction(job.gpus / len(job.gpu_groups))
        await self._sharing.prepare(
            manifests[job.pod.key], job.pod, job.node, job.gpu_groups, portion, reservations
        )

    async def _select_node(self, job: SentBind) -> None:
        """Tell each claim still to be provisioned its pod's node, as kube-scheduler's
        VolumeBinding does before the bind: the provisioner makes the volume there, and the
        kubelet starts the pod once the claim is bound."""
        for key in job.claims:
            namespace, name = claim_reference(key)
            await self._kube.merge_patch(
                f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{name}",
                {"metadata": {"annotations": {SELECTED_NODE_ANNOTATION: job.node}}},
            )

    async def _take_volumes(self, job: SentBind) -> None:
        """Write each given volume's `claimRef`, as kube-scheduler's binder does before the
        bind: the volume controller then binds the claim. The volume's resourceVersion is the
        precondition, so a volume taken meanwhile is not taken twice (409)."""
        for claim, volume in job.volumes:
            namespace, name = claim_reference(claim.key)
            reference = {"apiVersion": "v1", "kind": "PersistentVolumeClaim"}
            reference |= {"namespace": namespace, "name": name}
            if claim.uid:
                reference["uid"] = claim.uid
            metadata: dict[str, Any] = {"annotations": {BOUND_BY_CONTROLLER_ANNOTATION: "yes"}}
            if volume.resource_version:
                metadata["resourceVersion"] = volume.resource_version
            await self._kube.merge_patch(
                f"/api/v1/persistentvolumes/{volume.name}",
                {"metadata": metadata, "spec": {"claimRef": reference}},
            )

    async def _still_to_send(self, job: SentBind, report: BindReport) -> bool:
        """Before sending again a bind of unknown outcome: whether the pod still reads unbound."""
        reading = await self._read(job.pod)
        if reading.state is _State.UNBOUND:
            if job.unknown_answers < UNKNOWN_ANSWERS_LIMIT:
                return True
            await self._refused(job, f"no answer to {job.unknown_answers} binds", report)
        elif reading.state is _State.UNREADABLE:
            report.held[job.pod.uid] = Held(job.pod.key, job.placement, job)
        else:
            await self._settle(job, reading, report)
        return False

    async def _answered(self, job: SentBind, error: ApiError, report: BindReport) -> None:
        """The Binding was not accepted: read what that means for the pod."""
        if error.status == _GONE:
            self._dropped(job, "pod not found", report)
        elif error.status == _CONFLICT:
            reading = await self._read(job.pod)
            if reading.state is _State.UNBOUND:
                await self._refused(job, f"{error.status} {error.message}", report)
            elif reading.state is _State.UNREADABLE:
                self._unknown(job, f"{error.status}, then {reading.error}", report)
            else:
                await self._settle(job, reading, report)
        elif error.outcome_unknown:
            self._unknown(job, str(error), report)
        else:
            await self._refused(job, f"{error.status} {error.reason}", report)

    async def _settle(self, job: SentBind, reading: _Reading, report: BindReport) -> None:
        """The pod reads bound or gone: no bind of ours is pending any more."""
        if reading.state is _State.GONE:
            self._dropped(job, "pod deleted or replaced", report)
        elif reading.node == job.node:
            self._bound(job, job.node, report)
        else:
            log.info("pod already bound elsewhere", pod=job.pod.key, node=reading.node)
            if job.gpu_groups:  # our device labels do not describe where it runs
                await self._sharing.undo(job.pod, job.gpu_groups)
            report.held[job.pod.uid] = Held(job.pod.key, Assumed(reading.node, ()))

    async def _read(self, pod: Pod) -> _Reading:
        try:
            manifest = await self._kube.get(f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}")
        except ApiError as error:
            if error.status == _GONE:
                return _Reading(_State.GONE)
            return _Reading(_State.UNREADABLE, error=str(error))
        metadata = manifest.get("metadata") or {}
        node = str((manifest.get("spec") or {}).get("nodeName") or "")
        if metadata.get("uid") != pod.uid:
            return _Reading(_State.GONE)
        if node:
            return _Reading(_State.BOUND, node)
        if metadata.get("deletionTimestamp"):
            return _Reading(_State.GONE)
        return _Reading(_State.UNBOUND)

    def _bound(self, job: SentBind, node: str, report: BindReport) -> None:
        self._backoff.succeeded(job.pod.uid)
        placement = Assumed(node, job.gpu_groups)
        report.bound[job.pod.key] = placement
        report.held[job.pod.uid] = Held(job.pod.key, placement)
        pod = job.pod
        about = InvolvedObject("v1", "Pod", pod.namespace, pod.name, pod.uid)
        self._events.record(about, NORMAL, SCHEDULED, f"Successfully assigned {pod.key} to {node}")

    def _unknown(self, job: SentBind, error: str, report: BindReport) -> None:
        """It may have committed: keep the pod on the node, devices and all, and ask again."""
        again = dataclasses.replace(job, unknown_answers=job.unknown_answers + 1)
        report.held[job.pod.uid] = Held(job.pod.key, job.placement, again)
        log.warning(
            "bind outcome unknown; held on the node and sent again next cycle",
            pod=job.pod.key,
            node=job.node,
            error=error,
        )

    def _dropped(self, job: SentBind, why: str, report: BindReport) -> None:
        report.dropped.add(job.pod.key)
        log.info("pod not bound: it is gone", pod=job.pod.key, reason=why)

    async def _refused(self, job: SentBind, error: str, report: BindReport) -> None:
        if job.gpu_groups:
            await self._sharing.undo(job.pod, job.gpu_groups)
        self._backoff_failed(job, error, report)

    def _backoff_failed(self, job: SentBind, error: str, report: BindReport) -> None:
        pod = job.pod
        self._backoff.failed(
            pod.key, pod.uid, pod.group, job.queue, job.node, error, time.monotonic()
        )
        report.failed[pod.key] = error
        log.warning("bind failed", pod=pod.key, node=job.node, error=error)

    async def _post_binding(self, job: SentBind) -> None:
        pod = job.pod
        # The uid makes the server refuse to bind a newer pod of the same name.
        metadata: dict[str, Any] = {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid}
        if job.annotations:
            metadata["annotations"] = dict(job.annotations)
        await self._kube.create(
            f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/binding",
            {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": metadata,
                "target": {"apiVersion": "v1", "kind": "Node", "name": job.node},
            },
            proceed=self._is_leader,  # a throttled bind is not sent again by a deposed leader
        )

    async def evict(self, evictions: Sequence[Eviction], pods: Mapping[str, Pod]) -> list[str]:
        """Mark each victim DisruptionTarget and delete it; the pods actually evicted."""
        evicted: list[str] = []

        async def one(eviction: Eviction) -> None:
            pod = pods[eviction.pod]
            try:
                if await self._evict_one(pod, eviction):
                    evicted.append(pod.key)
            except Exception:  # one broken eviction must not stop the others
                log.exception("eviction went wrong", pod=pod.key)

        await asyncio.gather(*(one(e) for e in evictions if e.pod in pods))
        return evicted

    async def _evict_one(self, pod: Pod, eviction: Eviction) -> bool:
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}"
        condition = {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "PreemptionByScheduler",
            "message": _eviction_message(eviction),
            "lastTransitionTime": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        }
        async with self._slots:
            if not self._is_leader():  # as for binds: no write once the Lease is known lost
                return False
            try:
                await self._kube.write(
                    "PATCH",
                    f"{path}/status",
                    {"status": {"conditions": [condition]}},
                    STRATEGIC_MERGE_PATCH,
                )
                await self._kube.delete(path, {"preconditions": {"uid": pod.uid}})
            except ApiError as error:
                if error.status != _GONE:
                    log.warning("eviction failed", pod=pod.key, error=str(error))
                    return False
        about = InvolvedObject("v1", "Pod", pod.namespace, pod.name, pod.uid)
        self._events.record(about, NORMAL, EVICTED, _eviction_message(eviction))
        return True


def still_held(held: Mapping[str, Held], pods: Mapping[str, Mapping[str, Any]]) -> dict[str, Held]:
    """The held pods (by uid) the cache does not settle yet: forgotten once it shows that
    uid bound, or no pod with that uid (deleted, or replaced by a newer pod of the name)."""
    return {uid: entry for uid, entry in held.items() if _unbound(pods.get(entry.key), uid)}


def _unbound(pod: Mapping[str, Any] | None, uid: str) -> bool:
    """The pod is there, with this uid (a pod's uid keeps its key), and on no node yet."""
    return (
        pod is not None
        and (pod.get("metadata") or {}).get("uid") == uid
        and not (pod.get("spec") or {}).get("nodeName")
    )


async def _carried(annotations: Annotations, pod_key: str) -> Mapping[str, str] | None:
    """What the pod's Binding carries; None (not bound this cycle) if asking went wrong."""
    try:
        return await annotations(pod_key)
    except Exception:
        log.exception("grouping writes could not be awaited", pod=pod_key)
        return None


def _reading(manifest: Mapping[str, Any] | None, volumes: VolumeObjects | None) -> ClaimsReading:
    """What the pod's claims say (`kai.api.volumes`): which to tell its node on binding,
    and which take a volume made beforehand."""
    if manifest is None or volumes is None or not names_claims(manifest):
        return ClaimsReading()
    return pod_claims(manifest, volumes)


class _VolumeWork(NamedTuple):
    """What a pod's bind writes for its claims first, in `SentBind`'s order."""

    claims: tuple[str, ...] = ()
    """To tell the node (`kai.api.volumes`: their volume is made there)."""
    volumes: tuple[tuple[StaticClaim, FreeVolume], ...] = ()
    """Given a volume made beforehand, whose `claimRef` is written."""
    refusal: str = ""
    """Why the bind is refused before anything is written."""


def _eviction_message(eviction: Eviction) -> str:
    cause = f" for {eviction.preemptor}" if eviction.preemptor else ""
    return f"evicted by {eviction.action.value}{cause} ({eviction.rule})"
