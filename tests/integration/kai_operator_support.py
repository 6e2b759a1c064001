"""Helpers for the operator's integration tests: run `kai run` in process, make queues and pods.

The operator runs as in production (`run_operator` with a real kubeconfig, watch
cache, Lease and HTTP endpoints) as a task on the test's event loop; the tests
only talk to it through the API server, as users would.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from prometheus_client.parser import text_string_to_metric_families

from kai.engine.cycle import run_cycle
from kai.operator.app import Operator, run_operator
from kai.operator.config import DEFAULT_RESERVATION_NAMESPACE, OperatorConfig
from kai.operator.isolation import Engine
from kai.testing.faultproxy import Rule
from kai.testing.invariants import InvariantWatcher

QUEUES = ("scheduling.run.ai", "v2", "queues")
POD_GROUPS = ("scheduling.run.ai", "v2alpha2", "podgroups")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def body(manifest: Mapping[str, Any]) -> Any:
    """A manifest as the client's body: it sends a dict as it is, though its stubs name only
    its models."""
    return manifest


def operator_config(kubeconfig: Path, namespace: str, **overrides: Any) -> OperatorConfig:
    """Fast cycles and a short Lease, so takeovers and retries happen within a test's patience;
    no full cycle of a quiet cluster but when a change or an engine time rule calls for it, so
    a test that waits for one of those proves the loop wakes for it."""
    config = OperatorConfig(
        kubeconfig=kubeconfig,
        period_seconds=0.5,
        time_limit_seconds=0.5,
        metrics_port=0,
        metrics_host="127.0.0.1",
        namespace=namespace,
        lease_name=unique("kai-lease"),
        lease_seconds=3.0,
        renew_deadline_seconds=2.0,
        retry_seconds=0.5,
        reservation_runtime_class=None,
        quiet_recheck_seconds=3600.0,
    )
    return replace(config, **overrides)


@contextlib.asynccontextmanager
async def running_operator(
    config: OperatorConfig, run_engine: Engine = run_cycle
) -> AsyncIterator[tuple[Operator, asyncio.Task[None]]]:
    """The operator, started and synced; cancelled (releasing its Lease) on exit, also when the
    test fails or times out (the per-test timeout cancels the test, so this `finally` runs)."""
    started: asyncio.Future[Operator] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(run_operator(config, started, run_engine))
    try:
        async with asyncio.timeout(60):
            either: set[asyncio.Future[Any]] = {started, task}
            done, _ = await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            if task in done:
                task.result()  # raises what stopped it
            operator = started.result()
            await operator.cache.wait_synced()
        yield operator, task
    finally:
        await stop_operator(task)


STOP_SECONDS = 60.0
"""A cancelled operator releases its Lease and closes its client; on a loaded machine that
takes a few seconds, never a minute."""


async def stop_operator(task: asyncio.Task[None]) -> None:
    """Cancel the operator and wait for it to stop; fail, naming what it is stuck in, if it
    does not, rather than hang the session (its leftovers would bind in later tests)."""
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=STOP_SECONDS)
    if not done:
        stuck = [
            f"{other.get_name()}: {other.get_stack(limit=8)}"
            for other in asyncio.all_tasks()
            if not other.done() and other is not asyncio.current_task()
        ]
        raise AssertionError(
            f"the operator did not stop within {STOP_SECONDS:g}s of being cancelled; "
            "tasks still running:\n" + "\n".join(stuck)
        )
    with contextlib.suppress(asyncio.CancelledError):
        task.result()


async def wait_for(
    what: str,
    check: Callable[[], Awaitable[bool]],
    timeout: float = 60.0,
    every: float = 0.1,
    seen: Callable[[], str] | None = None,
) -> None:
    """Poll until `check` holds; fail naming `what` after `timeout` seconds, with what
    `seen` says was there instead."""
    try:
        async with asyncio.timeout(timeout):
            while not await check():
                await asyncio.sleep(every)
    except TimeoutError:
        instead = f"; seen: {seen()}" if seen is not None else ""
        raise AssertionError(f"timed out after {timeout:g}s waiting for {what}{instead}") from None


async def wait_passes(operator: Operator, more: int, timeout: float = 120.0) -> None:
    """Let the operator's loop make `more` passes, each a chance to act on what it believes:
    a cycle, or one skipped because nothing changed since a cycle that decided nothing
    (which would decide nothing again)."""
    target = operator.loop.passes + more

    async def done() -> bool:
        return operator.loop.passes >= target

    await wait_for(f"{more} more passes of the loop", done, timeout=timeout)


async def _get(operator: Operator, path: str) -> tuple[int, str]:
    assert operator.server is not None
    url = f"http://127.0.0.1:{operator.server.port}{path}"
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.text()


async def healthz(operator: Operator) -> int:
    """The HTTP status of the operator's liveness probe."""
    return (await _get(operator, "/healthz"))[0]


async def metric(operator: Operator, name: str) -> float:
    """A label-less sample, scraped from the operator's /metrics (0 when absent)."""
    _, text = await _get(operator, "/metrics")
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and not sample.labels:
                return float(sample.value)
    return 0.0


async def create_queue(
    api: client.ApiClient,
    name: str,
    gpu_quota: float = 0,
    gpu_limit: float = -1,
    parent: str | None = None,
    labels: dict[str, str] | None = None,
    **spec_fields: str,
) -> None:
    """A queue with this GPU quota and limit; `spec_fields` are further spec fields (camelCase)."""
    unlimited = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
    spec: dict[str, Any] = {
        "resources": {
            "gpu": {"quota": gpu_quota, "limit": gpu_limit, "overQuotaWeight": 1},
            "cpu": unlimited,
            "memory": unlimited,
        }
    }
    if parent:
        spec["parentQueue"] = parent
    spec.update(spec_fields)
    await client.CustomObjectsApi(api).create_cluster_custom_object(
        *QUEUES,
        {
            "apiVersion": "scheduling.run.ai/v2",
            "kind": "Queue",
            "metadata": {"name": name, "labels": labels or {}},
            "spec": spec,
        },
    )


async def delete_queue(api: client.ApiClient, name: str) -> None:
    with contextlib.suppress(ApiException):
        await client.CustomObjectsApi(api).delete_cluster_custom_object(*QUEUES, name)


@contextlib.asynccontextmanager
async def a_queue(api: client.ApiClient, prefix: str) -> AsyncIterator[str]:
    """A queue of its own for a test (no quota, no limit), deleted at its end."""
    name = unique(prefix)
    await create_queue(api, name)
    try:
        yield name
    finally:
        await delete_queue(api, name)


async def get_queue(api: client.ApiClient, name: str) -> dict[str, Any]:
    found: dict[str, Any] = await client.CustomObjectsApi(api).get_cluster_custom_object(
        *QUEUES, name
    )
    return found


async def list_pod_groups(api: client.ApiClient, namespace: str) -> list[dict[str, Any]]:
    listing = await client.CustomObjectsApi(api).list_namespaced_custom_object(
        *POD_GROUPS[:2], namespace, POD_GROUPS[2]
    )
    items: list[dict[str, Any]] = listing["items"]
    return items


async def ensure_namespace(
    api: client.ApiClient, name: str = DEFAULT_RESERVATION_NAMESPACE
) -> None:
    try:
        await client.CoreV1Api(api).create_namespace(
            client.V1Namespace(metadata=client.V1ObjectMeta(name=name))
        )
    except ApiException as error:
        if error.status != 409:
            raise


def gpu_pod(
    name: str,
    queue: str,
    gpus: int = 0,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
) -> client.V1Pod:
    """A kai-scheduler pod asking for whole GPUs (or, with annotations, a fraction)."""
    resources = client.V1ResourceRequirements(
        requests={
            "cpu": "100m",
            "memory": "100Mi",
            **({"nvidia.com/gpu": str(gpus)} if gpus else {}),
        },
        limits={"nvidia.com/gpu": str(gpus)} if gpus else None,
    )
    return client.V1Pod(
        metadata=client.V1ObjectMeta(
            name=name,
            labels={"kai.scheduler/queue": queue, **(labels or {})},
            annotations=annotations,
        ),
        spec=client.V1PodSpec(
            scheduler_name="kai-scheduler",
            termination_grace_period_seconds=0,
            containers=[
                client.V1Container(name="main", image="example.invalid/none", resources=resources)
            ],
        ),
    )


def gpu_job(
    name: str, queue: str, parallelism: int, gpus: int, min_member: int | None = None
) -> client.V1Job:
    annotations = {"kai.scheduler/batch-min-member": str(min_member)} if min_member else None
    template = gpu_pod("unused", queue, gpus)
    template.spec.restart_policy = "Never"
    return client.V1Job(
        metadata=client.V1ObjectMeta(
            name=name, labels={"kai.scheduler/queue": queue}, annotations=annotations
        ),
        spec=client.V1JobSpec(
            parallelism=parallelism,
            completions=parallelism,
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=template.metadata.labels), spec=template.spec
            ),
        ),
    )


async def pods_in(api: client.ApiClient, namespace: str) -> list[client.V1Pod]:
    pods: list[client.V1Pod] = (await client.CoreV1Api(api).list_namespaced_pod(namespace)).items
    return pods


async def bound_pods(api: client.ApiClient, namespace: str) -> dict[str, str]:
    """Pod name -> node, for the namespace's bound pods."""
    return {
        p.metadata.name: p.spec.node_name for p in await pods_in(api, namespace) if p.spec.node_name
    }


async def events_for(api: client.ApiClient, namespace: str, name: str) -> list[client.CoreV1Event]:
    listing = await client.CoreV1Api(api).list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={name}"
    )
    events: list[client.CoreV1Event] = listing.items
    return events


async def told_unschedulable(api: client.ApiClient, namespace: str, name: str, *parts: str) -> bool:
    """Whether the object has an Unschedulable event whose message holds every part."""
    return any(
        event.reason == "Unschedulable" and all(part in (event.message or "") for part in parts)
        for event in await events_for(api, namespace, name)
    )


async def wait_bound(
    api: client.ApiClient, namespace: str, count: int, timeout: float = 120
) -> None:
    """Wait until `count` pods of the namespace are bound (generous: the machine may be loaded)."""

    async def enough() -> bool:
        return len(await bound_pods(api, namespace)) >= count

    await wait_for(f"{count} pods bound in {namespace}", enough, timeout=timeout, every=0.2)


async def wait_fired(rule: Rule, times: int = 1, timeout: float = 120) -> None:
    """Wait until the fault proxy has applied `rule` at least `times` times."""

    async def fired() -> bool:
        return rule.fired >= times

    await wait_for(f"{rule} to fire {times}x", fired, timeout=timeout)


@contextlib.asynccontextmanager
async def reporting(watcher: InvariantWatcher) -> AsyncIterator[None]:
    """A failed wait also says which invariants had been broken by then (often the cause)."""
    try:
        yield
    except AssertionError as error:
        broken = watcher.current_violations()
        raise AssertionError(f"{error}; invariants broken so far: {broken}") from error
