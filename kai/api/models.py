"""Wire models of KAI's scheduling CRDs: Queue (`scheduling.run.ai/v2`) and PodGroup (`v2alpha2`).

Field names, defaults and accepted values are KAI's (kai-semantics §1, §3.1, §3.2), so
an object written for KAI reads the same here and a field KAI rejects is rejected here
with its path. Values are held exactly as written, in the CRD's own units (queue memory
in MB, cpu in millicores); turning them into engine objects, and the rules that span
several fields, live in `kai.api.queues` and `kai.api.podgroups`.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Literal

from pydantic import Field, StrictBool, StrictInt, field_validator

from kai.api.fields import Count, Duration, ExactNumber, ObjectMeta, Quantity, WireModel
from kai.engine.model import DEFAULT_QUEUE_PRIORITY, UNLIMITED


class QueueResource(WireModel):
    """One resource of a queue. `None` means the field was left out, which KAI reads as 0."""

    quota: ExactNumber | None = None
    over_quota_weight: ExactNumber | None = None
    limit: ExactNumber | None = None

    @field_validator("quota", "limit")
    @classmethod
    def _unlimited_or_non_negative(cls, value: Fraction | None) -> Fraction | None:
        if value is not None and value < 0 and value != UNLIMITED:
            raise ValueError(f"must be -1 (unlimited) or at least 0, got {_decimal(value)}")
        return value

    @field_validator("over_quota_weight")
    @classmethod
    def _non_negative(cls, value: Fraction | None) -> Fraction | None:
        if value is not None and value < 0:
            raise ValueError(f"must be at least 0, got {_decimal(value)}")
        return value


class QueueResources(WireModel):
    """gpu in devices (fractions allowed), cpu in millicores, memory in MB (10^6 bytes)."""

    gpu: QueueResource = QueueResource()
    cpu: QueueResource = QueueResource()
    memory: QueueResource = QueueResource()


class QueueSpec(WireModel):
    display_name: str = ""
    parent_queue: str = ""
    priority: StrictInt = DEFAULT_QUEUE_PRIORITY
    resources: QueueResources  # KAI's webhook rejects a queue without it
    preempt_min_runtime: Duration | None = None
    reclaim_min_runtime: Duration | None = None


class QueueStatus(WireModel):
    """Written by the queue controller: gpu fractional, cpu in millicores, memory in MB."""

    allocated: dict[str, Quantity] = Field(default_factory=dict)
    allocated_non_preemptible: dict[str, Quantity] = Field(default_factory=dict)
    requested: dict[str, Quantity] = Field(default_factory=dict)


class Queue(WireModel):
    metadata: ObjectMeta
    spec: QueueSpec
    status: QueueStatus = QueueStatus()


class TopologyConstraint(WireModel):
    topology: str = ""
    required_topology_level: str = ""
    preferred_topology_level: str = ""


class SubGroup(WireModel):
    name: str = Field(max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    min_member: Count | None = None
    min_sub_group: Count | None = None
    parent: str | None = None
    topology_constraint: TopologyConstraint | None = None


Preemptibility = Literal["preemptible", "non-preemptible", ""]


class PodGroupSpec(WireModel):
    min_member: Count | None = None
    min_sub_group: Count | None = None
    queue: str = ""
    priority_class_name: str = ""
    preemptibility: Preemptibility = ""
    topology_constraint: TopologyConstraint | None = None
    sub_groups: list[SubGroup] = Field(default_factory=list)
    mark_unschedulable: StrictBool | None = None
    scheduling_backoff: StrictInt | None = None
    preemption_delay: Duration | None = None
    staleness_grace_period: Duration | None = None

    @field_validator("scheduling_backoff")
    @classmethod
    def _only_minus_one_or_one(cls, value: int | None) -> int | None:
        if value not in (None, -1, 1):
            raise ValueError(f"only -1 and 1 are supported, got {value}")
        return value

    @field_validator("preemption_delay")
    @classmethod
    def _not_negative(cls, value: Fraction | None) -> Fraction | None:
        if value is not None and value < 0:
            raise ValueError("must not be negative")
        return value


class PodGroup(WireModel):
    """Legacy fields (parallelism, status.phase, ...) are ignored like any unknown field."""

    metadata: ObjectMeta
    spec: PodGroupSpec = PodGroupSpec()


def _decimal(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else str(float(value))
