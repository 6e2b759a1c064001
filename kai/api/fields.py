"""Field types shared by the wire models: exact numbers, quantities, durations and timestamps.

Manifests reach us as YAML, whose loader has already turned `0.5` into a float and an
unquoted timestamp into a datetime. These types accept what a YAML or JSON loader can
produce for a field and nothing a Kubernetes API server would reject, and they hold the
value in the exact form the engine computes with (`Fraction`), never a float.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import UTC, date, datetime
from fractions import Fraction
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, StrictInt, model_validator
from pydantic.alias_generators import to_camel

from kai.api.durations import parse_duration
from kai.api.quantity import parse_quantity


class WireModel(BaseModel):
    """Base of every wire model: Kubernetes' camelCase names, unknown fields ignored.

    Unknown fields are ignored because real objects carry far more than kai reads, and
    KAI itself tells readers to ignore fields it has removed (kai-semantics §3.2).
    An explicit `null` means "unset", as in Go's JSON decoding, so defaults apply.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="ignore",
        frozen=True,
        arbitrary_types_allowed=True,
    )

    @model_validator(mode="before")
    @classmethod
    def _null_means_unset(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            return {key: value for key, value in data.items() if value is not None}
        return data


def _exact_number(value: object) -> Fraction:
    """A JSON number (KAI's float64 fields) as the exact decimal its author wrote."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"expected a number, got {value!r}")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"expected a finite number, got {value!r}")
        # repr() is the shortest decimal that reads back as this float: what the author typed.
        return Fraction(repr(value))
    return Fraction(value)


def _quantity(value: object) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"{value!r} is not a quantity (expected e.g. 500m, 16Gi, 1e3)")
    return parse_quantity(value)


_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


def parse_timestamp(value: object) -> datetime:
    """An RFC 3339 time; one without an offset (YAML drops a `Z` it never saw) is UTC."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, date):
        raise ValueError(f"{value} is a date, not an RFC 3339 time such as 2024-05-01T12:00:00Z")
    elif isinstance(value, str) and _RFC3339.match(value):
        moment = datetime.fromisoformat(value.replace("z", "Z"))
    else:
        raise ValueError(f"{value!r} is not an RFC 3339 time such as 2024-05-01T12:00:00Z")
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


ExactNumber = Annotated[Fraction, PlainValidator(_exact_number)]
"""A JSON number held exactly: `0.1` is 1/10."""

Quantity = Annotated[Fraction, PlainValidator(_quantity)]
"""A Kubernetes quantity in base units (`500m` is 1/2)."""

Duration = Annotated[Fraction, PlainValidator(parse_duration)]
"""A Kubernetes Duration string, in seconds."""

Timestamp = Annotated[datetime, PlainValidator(parse_timestamp)]
"""An RFC 3339 time, always timezone-aware."""

Count = Annotated[StrictInt, Field(ge=0)]
"""A non-negative integer written as a JSON integer (not `"3"`, not `3.0`)."""


class ObjectMeta(WireModel):
    """The part of `metadata` kai reads."""

    name: str = Field(min_length=1)
    namespace: str = ""
    uid: str = ""
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    creation_timestamp: Timestamp | None = None
    deletion_timestamp: Timestamp | None = None


def integer_or_none(text: str) -> int | None:
    """The integer a label or annotation value spells (`-3`, `+7`, `12`), else None."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    return int(text) if digits.isascii() and digits.isdigit() else None
