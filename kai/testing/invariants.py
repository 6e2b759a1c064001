"""An independent watcher that records a run and checks the scheduler's invariants.

Fault tests must judge the scheduler by what the cluster shows, not by what the
scheduler believes, so this module watches pods, nodes, PodGroups and Queues
itself (its own list and watch, straight to the API server, with its own
arithmetic and no scheduler code) and checks, at every recorded event:

- no pod is bound twice: a pod uid never shows two different nodeNames, and no
  node holds more whole GPUs than it has (what a second bind of the same
  capacity looks like from outside);
- no queue is above its GPU limit at any instant (the GPUs of its running pods
  and of its child queues' running pods);
- no gang stays below minMember past its grace: a PodGroup with some, but fewer
  than minMember, scheduled pods for longer than the stale grace plus a slack
  for the eviction to be carried out;

and, once the run has settled, that each Queue's status.allocated GPUs equal
the GPUs of its running pods. A pod "runs" from its bind until it is deleted or
reaches Succeeded/Failed (no kubelet runs, so bound pods stay Pending).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from kai.kube.client import ApiError, Kube, connect

GPU = "nvidia.com/gpu"
QUEUE_LABEL = "kai.scheduler/queue"
POD_GROUP_ANNOTATION = "pod-group-name"
GPU_FRACTION_ANNOTATION = "gpu-fraction"
_TERMINAL = ("Succeeded", "Failed")
_WATCH_SECONDS = 60
_RETRY_SECONDS = 0.2
_SETTLE_POLL_SECONDS = 0.2


@dataclass(frozen=True)
class _Collection:
    kind: str
    path: str


_COLLECTIONS = (
    _Collection("Node", "/api/v1/nodes"),
    _Collection("Queue", "/apis/scheduling.run.ai/v2/queues"),
    _Collection("PodGroup", "/apis/scheduling.run.ai/v2alpha2/podgroups"),
    _Collection("Pod", "/api/v1/pods"),
)


@dataclass(frozen=True)
class Recorded:
    """One change the watcher saw: when (monotonic seconds), of what, and which kind of change."""

    at: float
    kind: str
    change: str
    key: str
    node: str = ""
    phase: str = ""


@dataclass
class _Gang:
    below_since: float | None = None


@dataclass
class _State:
    objects: dict[str, dict[str, dict[str, Any]]] = field(default_factory=lambda: defaultdict(dict))
    node_of_uid: dict[str, str] = field(default_factory=dict)
    gangs: dict[str, _Gang] = field(default_factory=lambda: defaultdict(_Gang))
    over_limit: set[str] = field(default_factory=set)


def _key(obj: Mapping[str, Any]) -> str:
    metadata = obj.get("metadata") or {}
    namespace = metadata.get("namespace")
    return f"{namespace}/{metadata.get('name')}" if namespace else str(metadata.get("name"))


def _quantity(text: object) -> float:
    """A GPU quantity ("2", "500m") as a number."""
    value = str(text or "0")
    return float(value[:-1]) / 1000 if value.endswith("m") else float(value)


def whole_gpus(pod: Mapping[str, Any]) -> float:
    """The pod's nvidia.com/gpu requests, summed over its containers."""
    containers = (pod.get("spec") or {}).get("containers") or []
    return sum(
        _quantity(((c.get("resources") or {}).get("requests") or {}).get(GPU)) for c in containers
    )


def queue_gpus(pod: Mapping[str, Any]) -> float:
    """What the pod charges its queue: whole GPUs, or its GPU fraction."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    fraction = annotations.get(GPU_FRACTION_ANNOTATION)
    return whole_gpus(pod) + (_quantity(fraction) if fraction else 0.0)


def is_running(pod: Mapping[str, Any]) -> bool:
    """Bound and not finished: holds its resources."""
    bound = bool((pod.get("spec") or {}).get("nodeName"))
    return bound and (pod.get("status") or {}).get("phase") not in _TERMINAL


def is_scheduled(pod: Mapping[str, Any]) -> bool:
    """Bound and not failed: counts toward its gang's minMember (a finished member still does)."""
    bound = bool((pod.get("spec") or {}).get("nodeName"))
    return bound and (pod.get("status") or {}).get("phase") != "Failed"


class InvariantWatcher:
    """Records every Pod, Node, PodGroup and Queue change and checks the invariants on each.

    `stale_grace_seconds` is the scheduler's stale-gang grace; `slack_seconds` is
    the time the scheduler gets, after the grace, to evict a partial gang; `clock`
    (monotonic seconds) dates the events. With `namespace`, only that namespace's
    pods and PodGroups are followed (the run's own, not those of earlier runs that
    are still being deleted); nodes and queues are cluster-wide.
    """

    def __init__(
        self,
        kubeconfig: Path,
        stale_grace_seconds: float = 60.0,
        slack_seconds: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        namespace: str | None = None,
    ) -> None:
        self._kubeconfig = kubeconfig
        self._namespace = namespace
        self._clock = clock
        self._gang_patience = stale_grace_seconds + slack_seconds
        self._state = _State()
        self._tasks: list[asyncio.Task[None]] = []
        self._synced: dict[str, asyncio.Event] = {c.kind: asyncio.Event() for c in _COLLECTIONS}
        self._stack = contextlib.AsyncExitStack()
        self.events: list[Recorded] = []
        self.violations: list[str] = []
        """Broken invariants, in the order they were seen."""
        self.binds = 0
        """Pods seen going from unbound to bound."""
        self.relists = 0

    async def __aenter__(self) -> InvariantWatcher:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def start(self, timeout: float = 60.0) -> None:
        """Begin watching; returns once every collection has been listed."""
        client = await self._stack.enter_async_context(await connect(self._kubeconfig))
        kube = Kube(client)
        self._tasks = [asyncio.create_task(self._follow(kube, c)) for c in _COLLECTIONS]
        async with asyncio.timeout(timeout):
            for synced in self._synced.values():
                await synced.wait()

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        await self._stack.aclose()

    def current_violations(self) -> list[str]:
        """What has been broken so far, plus partial gangs that are past their patience now."""
        now = self._clock()
        open_gangs = [
            f"PodGroup {key} below minMember for {now - gang.below_since:.0f}s (still open)"
            for key, gang in sorted(self._state.gangs.items())
            if gang.below_since is not None and now - gang.below_since > self._gang_patience
        ]
        return [*self.violations, *open_gangs]

    def queue_status_mismatches(self, queues: Iterable[str]) -> list[str]:
        """Queues whose status.allocated GPUs differ from the GPUs their running pods hold."""
        usage = self._queue_usage()
        found = []
        for name in queues:
            queue = self._state.objects["Queue"].get(name)
            if queue is None:
                found.append(f"Queue {name} not seen")
                continue
            allocated = ((queue.get("status") or {}).get("allocated") or {}).get(GPU)
            reported = _quantity(allocated) if allocated is not None else None
            if reported is None or abs(reported - usage.get(name, 0.0)) > 1e-6:
                found.append(
                    f"Queue {name} status.allocated {GPU}={allocated}, "
                    f"running pods hold {usage.get(name, 0.0):g}"
                )
        return found

    async def verify(self, queues: Iterable[str], timeout: float = 90.0) -> list[str]:
        """Every violation of the run, once queue status has settled (waiting up to `timeout`)."""
        names = list(queues)
        deadline = time.monotonic() + timeout
        while self.queue_status_mismatches(names) and time.monotonic() < deadline:
            await asyncio.sleep(_SETTLE_POLL_SECONDS)
        return [*self.current_violations(), *self.queue_status_mismatches(names)]

    async def _follow(self, kube: Kube, collection: _Collection) -> None:
        """List, then watch; any failure or 410 relists (a diff against what was recorded)."""
        version: str | None = None
        while True:
            try:
                if version is None:
                    version = await self._relist(kube, collection)
                version = await self._watch(kube, collection, version)
            except ApiError as error:
                if error.status == 404:  # the CRD is not installed yet
                    self._synced[collection.kind].set()
                version = None
                await asyncio.sleep(_RETRY_SECONDS)
            except ValueError:  # an undecodable line: the stream cannot be trusted
                version = None

    async def _relist(self, kube: Kube, collection: _Collection) -> str:
        listing = await kube.get(collection.path)
        items = {_key(item): item for item in listing.get("items") or []}
        known = self._state.objects[collection.kind]
        for key in set(known) - set(items):
            self.record(collection.kind, "DELETED", known[key])
        for key, item in items.items():
            if known.get(key) != item:
                self.record(collection.kind, "ADDED" if key not in known else "MODIFIED", item)
        self.relists += 1
        self._synced[collection.kind].set()
        return str((listing.get("metadata") or {}).get("resourceVersion") or "")

    async def _watch(self, kube: Kube, collection: _Collection, version: str) -> str | None:
        """Apply watch events until the stream ends; the version to resume from (None: relist)."""
        query = [
            ("resourceVersion", version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(_WATCH_SECONDS)),
        ]
        async for event in kube.watch(collection.path, query, timeout=_WATCH_SECONDS + 30):
            change = str(event.get("type"))
            obj = event.get("object") or {}
            if change == "ERROR":
                return None
            version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
            if change != "BOOKMARK":
                self.record(collection.kind, change, obj)
        return version

    def record(self, kind: str, change: str, obj: dict[str, Any]) -> None:
        """Take in one change (from the watch, or a relist's difference) and check it."""
        namespace = (obj.get("metadata") or {}).get("namespace")
        if self._namespace is not None and namespace and namespace != self._namespace:
            return
        key = _key(obj)
        objects = self._state.objects[kind]
        before = objects.get(key)
        if change == "DELETED":
            objects.pop(key, None)
        else:
            objects[key] = obj
        now = self._clock()
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        self.events.append(
            Recorded(
                now,
                kind,
                change,
                key,
                str(spec.get("nodeName") or ""),
                str(status.get("phase") or ""),
            )
        )
        if kind == "Pod":
            self._check_pod(obj, before, change)
        self._check_queue_limits()
        self._check_gangs(now)

    def _check_pod(
        self, pod: Mapping[str, Any], before: Mapping[str, Any] | None, change: str
    ) -> None:
        metadata = pod.get("metadata") or {}
        uid = str(metadata.get("uid"))
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        if not node:
            return
        first = self._state.node_of_uid.setdefault(uid, node)
        if first != node:
            self.violations.append(f"Pod {_key(pod)} (uid {uid}) bound to {first}, then to {node}")
        was_bound = before is not None and bool((before.get("spec") or {}).get("nodeName"))
        if change != "DELETED" and not was_bound and first == node:
            self.binds += 1
            self._check_node_capacity(node)

    def _check_node_capacity(self, node_name: str) -> None:
        node = self._state.objects["Node"].get(node_name)
        if node is None:
            return
        capacity = _quantity(((node.get("status") or {}).get("allocatable") or {}).get(GPU))
        held = sum(
            whole_gpus(p)
            for p in self._state.objects["Pod"].values()
            if is_running(p) and (p.get("spec") or {}).get("nodeName") == node_name
        )
        if held > capacity + 1e-6:
            self.violations.append(
                f"Node {node_name}: running pods hold {held:g} of {capacity:g} GPUs"
            )

    def _queue_of(self, pod: Mapping[str, Any]) -> str:
        metadata = pod.get("metadata") or {}
        group = (metadata.get("annotations") or {}).get(POD_GROUP_ANNOTATION)
        if group:
            found = self._state.objects["PodGroup"].get(f"{metadata.get('namespace')}/{group}")
            if found is not None and (found.get("spec") or {}).get("queue"):
                return str(found["spec"]["queue"])
        return str((metadata.get("labels") or {}).get(QUEUE_LABEL) or "")

    def _queue_usage(self) -> dict[str, float]:
        """GPUs held per queue, a child's counted in each of its ancestors."""
        queues = self._state.objects["Queue"]
        usage: dict[str, float] = defaultdict(float)
        for pod in self._state.objects["Pod"].values():
            if not is_running(pod):
                continue
            amount, name, seen = queue_gpus(pod), self._queue_of(pod), set()
            while name and name not in seen:
                seen.add(name)
                usage[name] += amount
                name = str(((queues.get(name) or {}).get("spec") or {}).get("parentQueue") or "")
        return usage

    def _check_queue_limits(self) -> None:
        usage = self._queue_usage()
        over = set()
        for name, queue in self._state.objects["Queue"].items():
            gpu = ((queue.get("spec") or {}).get("resources") or {}).get("gpu") or {}
            limit = float(gpu.get("limit", -1))
            if limit >= 0 and usage.get(name, 0.0) > limit + 1e-6:
                over.add(name)
                if name not in self._state.over_limit:  # recorded once per excursion
                    self.violations.append(
                        f"Queue {name}: running pods hold {usage[name]:g} GPUs, limit {limit:g}"
                    )
        self._state.over_limit = over

    def _check_gangs(self, now: float) -> None:
        scheduled: dict[str, int] = defaultdict(int)
        for pod in self._state.objects["Pod"].values():
            metadata = pod.get("metadata") or {}
            group = (metadata.get("annotations") or {}).get(POD_GROUP_ANNOTATION)
            if group and is_scheduled(pod):
                scheduled[f"{metadata.get('namespace')}/{group}"] += 1
        groups = self._state.objects["PodGroup"]
        for key in list(self._state.gangs):
            if key not in groups:
                del self._state.gangs[key]
        for key, group in groups.items():
            minimum = int((group.get("spec") or {}).get("minMember") or 1)
            count = scheduled.get(key, 0)
            gang = self._state.gangs[key]
            partial = 0 < count < minimum
            if partial and gang.below_since is None:
                gang.below_since = now
            elif not partial and gang.below_since is not None:
                if now - gang.below_since > self._gang_patience:
                    self.violations.append(
                        f"PodGroup {key} had {count}<{minimum} scheduled pods "
                        f"for {now - gang.below_since:.0f}s"
                    )
                gang.below_since = None
