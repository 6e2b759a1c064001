"""The admission handlers `kai webhook` serves: refuse bad Queues, PodGroups and GPU asks, and
wire fractional-GPU pods to their device ConfigMaps.

Every rule is the one `kai simulate` and the scheduler apply when they parse the same
object (`kai.api.admission`), so a manifest the webhook admits is one the scheduler
can use, and a refusal names the same field the scheduler's condition would.
The handlers are registered with kopf by id; the id is the URL path each webhook
configuration in `manifests/webhook.yaml` calls (`/validate-queue`, ...).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, cast

import kopf

from kai.api.admission import (
    gpu_sharing_injection,
    pod_admission_errors,
    pod_admission_warnings,
    pod_group_admission_errors,
    queue_admission_errors,
    topology_admission_errors,
)
from kai.api.constants import SCHEDULER_NAME
from kai.api.errors import ManifestError

QueueLister = Callable[[], Awaitable[Mapping[str, Mapping[str, Any]]]]
"""The cluster's queues by name, read when a Queue is admitted."""

UNPROCESSABLE = 422
UNAVAILABLE = 503
QUEUE_LIST_SECONDS = 5.0
"""Reading the queues must leave room in the webhooks' 10 s timeout for the answer."""

VALIDATE_QUEUE = "validate-queue"
VALIDATE_POD_GROUP = "validate-podgroup"
VALIDATE_POD = "validate-pod"
VALIDATE_TOPOLOGY = "validate-topology"
MUTATE_POD = "mutate-pod"

_CHANGES: list[kopf.Operation] = ["CREATE", "UPDATE"]
_CREATE: list[kopf.Operation] = ["CREATE"]


def admission_registry(
    list_queues: QueueLister, runtime_class: str | None
) -> kopf.OperatorRegistry:
    """A kopf registry holding only admission handlers: kopf watches none of these resources."""
    registry = kopf.OperatorRegistry()

    @kopf.on.validate(
        "scheduling.run.ai",
        "v2",
        "queues",
        id=VALIDATE_QUEUE,
        operations=_CHANGES,
        registry=registry,
    )
    async def validate_queue(body: kopf.Body, **_: Any) -> None:
        try:
            async with asyncio.timeout(QUEUE_LIST_SECONDS):
                existing = await list_queues()
        except Exception as error:  # the API server is unreachable: say so, do not guess
            raise kopf.AdmissionError(
                f"cannot read the cluster's queues to check spec.parentQueue: {error}",
                code=UNAVAILABLE,
            ) from error
        _refuse(queue_admission_errors(dict(body), existing))

    @kopf.on.validate(
        "scheduling.run.ai",
        "v2alpha2",
        "podgroups",
        id=VALIDATE_POD_GROUP,
        operations=_CHANGES,
        registry=registry,
    )
    def validate_pod_group(body: kopf.Body, **_: Any) -> None:
        _refuse(pod_group_admission_errors(dict(body)))

    @kopf.on.validate(
        "kai.scheduler",
        "v1alpha1",
        "topologies",
        id=VALIDATE_TOPOLOGY,
        operations=_CHANGES,
        registry=registry,
    )
    def validate_topology(body: kopf.Body, **_: Any) -> None:
        _refuse(topology_admission_errors(dict(body)))

    # The webhook configurations send only kai-scheduler pods (matchConditions); the handlers
    # check again, so a configuration without that condition still leaves other pods alone.
    @kopf.on.validate(
        "v1", "pods", id=VALIDATE_POD, operations=_CREATE, when=_ours, registry=registry
    )
    def validate_pod(body: kopf.Body, warnings: list[str], **_: Any) -> None:
        _refuse(pod_admission_errors(dict(body)))
        warnings.extend(pod_admission_warnings(dict(body)))

    @kopf.on.mutate("v1", "pods", id=MUTATE_POD, operations=_CREATE, when=_ours, registry=registry)
    def mutate_pod(body: kopf.Body, patch: kopf.Patch, **_: Any) -> None:
        injected = gpu_sharing_injection(dict(body), runtime_class)
        if injected is not None:
            patch.fns.append(lambda pod: _replace(pod, injected))

    return registry


def _ours(spec: kopf.Spec, **_: Any) -> bool:
    return spec.get("schedulerName") == SCHEDULER_NAME


def _refuse(errors: Sequence[ManifestError]) -> None:
    """One refusal listing every problem, each as `field: message`."""
    if errors:
        problems = "; ".join(f"{error.field}: {error.message}" for error in errors)
        raise kopf.AdmissionError(f"{errors[0].ref}: {problems}", code=UNPROCESSABLE)


def _replace(pod: kopf.RawBody, injected: Mapping[str, Any]) -> None:
    """kopf diffs the body after this against the request's to make the JSON patch."""
    body = cast(dict[str, Any], pod)
    body.clear()
    body.update(injected)
