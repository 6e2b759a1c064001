"""What one pod of a template asks for, in the engine's units (GPU devices, millicores, bytes).

The effective request (sidecars, init containers, overhead) is `kai.api.requests`'
job; this module only adds the GPU-sharing annotations, which the contract counts
as device fractions (`gpu-fraction: "0.5"` is half a GPU; `gpu-fraction-num-devices`
multiplies it). A `gpu-memory` request cannot become a fraction without knowing
the node's device memory, so it is not counted in the totals.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from kai.api import corev1
from kai.api.constants import (
    GPU_FRACTION_ANNOTATION,
    GPU_FRACTION_NUM_DEVICES_ANNOTATION,
    NVIDIA_GPU_RESOURCE,
)
from kai.api.errors import ObjectRef, validated
from kai.api.quantity import QuantityError, parse_quantity
from kai.api.requests import effective_requests
from kai.engine.resources import Resources


def pod_template_resources(template: Mapping[str, Any], ref: ObjectRef, field: str) -> Resources:
    """The effective request of one pod made from `template` (`{metadata, spec}`).

    `ref` and `field` name where the template came from, for errors in its quantities.
    """
    spec = validated(corev1.PodSpec, ref, template.get("spec") or {})
    amounts = effective_requests(spec)
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    return Resources(
        gpu=amounts.get(NVIDIA_GPU_RESOURCE, Fraction(0)) + _shared_gpus(annotations, ref, field),
        cpu=amounts.get("cpu", Fraction(0)) * 1000,
        memory=amounts.get("memory", Fraction(0)),
    )


def _shared_gpus(annotations: Mapping[str, Any], ref: ObjectRef, field: str) -> Fraction:
    fraction = annotations.get(GPU_FRACTION_ANNOTATION)
    if fraction is None:
        return Fraction(0)
    devices = annotations.get(GPU_FRACTION_NUM_DEVICES_ANNOTATION, "1")
    try:
        return parse_quantity(str(fraction)) * parse_quantity(str(devices))
    except QuantityError as error:
        raise ref.error(f"{field}.metadata.annotations", str(error)) from None
