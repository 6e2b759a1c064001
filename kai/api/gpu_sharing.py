"""A pod's GPU ask: whole devices (`nvidia.com/gpu`) or a share of devices (KAI's annotations).

Fractional pods do not request `nvidia.com/gpu` (the device plugin would hand them a
whole card); they carry annotations instead (kai-semantics §13.1):

- `gpu-fraction`: a portion of one device, a decimal in (0, 1]. A value above 1 is
  accepted only as a whole number, and then asks for that many whole devices;
- `gpu-memory`: MiB of one device, a positive integer;
- `gpu-fraction-num-devices`: how many devices receive that share (default 1).

A pod may use one form only. Anything else is an error naming the annotation, because
a silently ignored annotation is a pod that lands on the wrong card.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from fractions import Fraction

from kai.api.constants import (
    GPU_FRACTION_ANNOTATION,
    GPU_FRACTION_NUM_DEVICES_ANNOTATION,
    GPU_MEMORY_ANNOTATION,
    NVIDIA_GPU_RESOURCE,
)
from kai.api.errors import ManifestError, ObjectRef
from kai.engine.model import GpuRequest

_DECIMAL = re.compile(r"^([0-9]+(\.[0-9]*)?|\.[0-9]+)$")
_POSITIVE_INTEGER = re.compile(r"^[0-9]+$")

_FRACTION_FIELD = f"metadata.annotations.{GPU_FRACTION_ANNOTATION}"
_MEMORY_FIELD = f"metadata.annotations.{GPU_MEMORY_ANNOTATION}"
_DEVICES_FIELD = f"metadata.annotations.{GPU_FRACTION_NUM_DEVICES_ANNOTATION}"


def gpu_request(
    ref: ObjectRef,
    annotations: Mapping[str, str],
    whole_devices: int,
    names_whole_gpus: bool,
    errors: list[ManifestError],
) -> GpuRequest:
    """The pod's GPU ask; each problem is appended to `errors` and a zero ask returned.

    `whole_devices` is the pod's effective `nvidia.com/gpu` request and
    `names_whole_gpus` whether any container mentions that resource at all.
    """
    # KAI treats an empty annotation as absent.
    fraction_text = annotations.get(GPU_FRACTION_ANNOTATION) or None
    memory_text = annotations.get(GPU_MEMORY_ANNOTATION) or None
    devices_text = annotations.get(GPU_FRACTION_NUM_DEVICES_ANNOTATION)
    found_before = len(errors)

    if fraction_text is not None and memory_text is not None:
        errors.append(
            ref.error(
                _FRACTION_FIELD,
                f"cannot be combined with {GPU_MEMORY_ANNOTATION}: ask for a portion or for MiB",
            )
        )
    shared_field = _FRACTION_FIELD if fraction_text is not None else _MEMORY_FIELD
    if (fraction_text is not None or memory_text is not None) and names_whole_gpus:
        errors.append(
            ref.error(
                shared_field,
                f"cannot be combined with an {NVIDIA_GPU_RESOURCE} request or limit: "
                "a pod asks for whole devices or for a share of devices, not both",
            )
        )
    devices = _num_devices(ref, devices_text, errors)
    if devices_text is not None and fraction_text is None and memory_text is None:
        errors.append(
            ref.error(
                _DEVICES_FIELD,
                f"needs {GPU_FRACTION_ANNOTATION} or {GPU_MEMORY_ANNOTATION} to say what share "
                "each device gives",
            )
        )
    if fraction_text is not None:
        request = _from_fraction(ref, fraction_text, devices, devices_text is not None, errors)
    elif memory_text is not None:
        request = GpuRequest(memory_mib=_memory_mib(ref, memory_text, errors), devices=devices)
    else:
        request = GpuRequest(whole=whole_devices)
    return request if len(errors) == found_before else GpuRequest()


def _num_devices(ref: ObjectRef, text: str | None, errors: list[ManifestError]) -> int:
    if text is None:
        return 1
    if _POSITIVE_INTEGER.match(text) and int(text) > 0:
        return int(text)
    errors.append(ref.error(_DEVICES_FIELD, f"must be a positive whole number, got {text!r}"))
    return 1


def _memory_mib(ref: ObjectRef, text: str, errors: list[ManifestError]) -> int:
    if _POSITIVE_INTEGER.match(text) and int(text) > 0:
        return int(text)
    errors.append(ref.error(_MEMORY_FIELD, f"must be a positive whole number of MiB, got {text!r}"))
    return 0


def _from_fraction(
    ref: ObjectRef,
    text: str,
    devices: int,
    devices_given: bool,
    errors: list[ManifestError],
) -> GpuRequest:
    value = Fraction(text) if _DECIMAL.match(text) else None
    if value is not None and 0 < value <= 1:
        return GpuRequest(portion=value, devices=devices)
    if value is not None and value > 1 and value.denominator == 1:
        if devices_given:
            errors.append(
                ref.error(
                    _DEVICES_FIELD,
                    f"applies only to a portion of a device; {GPU_FRACTION_ANNOTATION} {text} "
                    "already asks for whole devices",
                )
            )
        return GpuRequest(whole=int(value))
    errors.append(
        ref.error(
            _FRACTION_FIELD,
            f"must be a portion of one device in (0, 1] such as 0.5, or a whole number of "
            f"devices, got {text!r}",
        )
    )
    return GpuRequest()
