"""The part of a manifest a wire model reads, worked out from the model itself.

Why: two objects whose read parts are equal validate alike, whatever else they carry
(a wire model ignores unknown fields), so a parse can be shared between them
(`kai.api.pods.SiblingParser`). Real pods of one template differ in fields kai never
reads: the API server gives each its own service-account volume. Walking the model's
fields, not a hand-kept list, keeps the read part in step with the models.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

from pydantic import BaseModel

from kai.api.fields import WireModel

Projector = Callable[[object], object]


def _function(method: Any) -> Any:
    """The function under a (class)method, to compare a validator's identity."""
    return getattr(method, "__func__", method)


_DROPS_NULLS = _function(
    WireModel.__pydantic_decorators__.model_validators["_null_means_unset"].func
)


def read_part(model: type[BaseModel], value: object) -> object:
    """`value` as far as validating it as `model` looks: for a mapping, the model's fields
    (under their wire name and their Python name, as both are accepted), each projected
    by its own type; any other value as it is (validation decides what it makes of it)."""
    return _projector(model)(value)


def field_keys(model: type[BaseModel], name: str) -> tuple[str, ...]:
    """The keys validation takes a field from: its wire name, and its Python name too."""
    info = model.model_fields[name]
    return tuple(dict.fromkeys((info.alias or name, name)))


@cache
def _projector(model: type[BaseModel]) -> Projector:
    if not _ignores_the_rest(model):
        return _whole
    fields = [
        (field_keys(model, name), _for_type(info.annotation))
        for name, info in model.model_fields.items()
    ]

    def project(value: object) -> object:
        if not isinstance(value, Mapping):
            return value
        read: dict[str, object] = {}
        for keys, inner in fields:
            for key in keys:
                if key in value:
                    read[key] = value[key] if inner is None else inner(value[key])
        return read

    return project


def _ignores_the_rest(model: type[BaseModel]) -> bool:
    """Whether validating `model` reads nothing but its fields: unknown keys ignored, and no
    validator that sees the whole mapping but the wire models' own, which drops nulls."""
    validators = model.__pydantic_decorators__.model_validators.values()
    return model.model_config.get("extra") == "ignore" and all(
        _function(validator.func) is _DROPS_NULLS for validator in validators
    )


def _whole(value: object) -> object:
    return value


def _for_type(annotation: Any) -> Projector | None:
    """How a field of this type is projected; None: taken whole."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _projector(annotation)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        models = [arg for arg in args if isinstance(arg, type) and issubclass(arg, BaseModel)]
        # Of two models, which one validates the value is validation's choice: take it whole.
        return _projector(models[0]) if len(models) == 1 else None
    if origin is list and args:
        item = _for_type(args[0])
        return None if item is None else _each_item(item)
    if origin is dict and len(args) == 2:
        entry = _for_type(args[1])
        return None if entry is None else _each_entry(entry)
    return None


def _each_item(item: Projector) -> Projector:
    def project(value: object) -> object:
        return [item(element) for element in value] if isinstance(value, list) else value

    return project


def _each_entry(entry: Projector) -> Projector:
    def project(value: object) -> object:
        if not isinstance(value, Mapping):
            return value
        return {key: entry(element) for key, element in value.items()}

    return project
