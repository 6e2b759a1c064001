"""A pod's GPU ask: whole devices (`nvidia.com/gpu`) or a share of devices (KAI's annotations).

Fractional pods do not request `nvidia.com/gpu` (the device plugin would hand them a
whole card); they carry annotations instead (kai-semantics §13.1):

- `gpu-fraction`: a portion of one device, a decimal in (0, 1]. A value above 1 is
  accepted only as a whole number, and then asks for that many whole devices;
- `gpu-memory`: MiB of one device, a positive integer;
- `gpu-fraction-num-devices`: how many devices receive that share (default 1).

A pod may use one form only. Anything else is an error naming the annotation, because
a silently ignored annotation is a pod that lands on the wrong card.

A share is given to one container (`gpu-fraction-container-name`, default the first),
which learns its device from two ConfigMaps named after the pod's
`runai/shared-gpu-configmap` prefix (§13.2). The admission webhook wires them into the
pod and the binder fills them, so both take the container and the names from here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Final

from kai.api import corev1
from kai.api.constants import (
    GPU_FRACTION_ANNOTATION,
    GPU_FRACTION_CONTAINER_ANNOTATION,
    GPU_FRACTION_NUM_DEVICES_ANNOTATION,
    GPU_MEMORY_ANNOTATION,
    MAX_GPUS_PER_NODE,
    MPS_ANNOTATION,
    NVIDIA_GPU_RESOURCE,
)
from kai.api.errors import ManifestError, ObjectRef
from kai.api.requests import asks_for_whole_gpus
from kai.engine.model import GpuRequest

_DECIMAL = re.compile(r"^([0-9]+(\.[0-9]*)?|\.[0-9]+)$")
_POSITIVE_INTEGER = re.compile(r"^[0-9]+$")

_FRACTION_FIELD = f"metadata.annotations.{GPU_FRACTION_ANNOTATION}"
_MEMORY_FIELD = f"metadata.annotations.{GPU_MEMORY_ANNOTATION}"
_DEVICES_FIELD = f"metadata.annotations.{GPU_FRACTION_NUM_DEVICES_ANNOTATION}"
_CONTAINER_FIELD = f"metadata.annotations.{GPU_FRACTION_CONTAINER_ANNOTATION}"
_MPS_FIELD = f"metadata.annotations.{MPS_ANNOTATION}"

GPU_ANNOTATIONS = (
    GPU_FRACTION_ANNOTATION,
    GPU_MEMORY_ANNOTATION,
    GPU_FRACTION_NUM_DEVICES_ANNOTATION,
    MPS_ANNOTATION,
)
"""The annotations whose rules `gpu_request` checks; a pod with none of them asks for no share."""


VISIBLE_DEVICES_KEY: Final = "NVIDIA_VISIBLE_DEVICES"
GPU_PORTION_KEY: Final = "GPU_PORTION"
NUM_OF_GPUS_KEY: Final = "RUNAI_NUM_OF_GPUS"  # KAI's legacy name for the portion
DEVICE_ENV_VARS: Final = (VISIBLE_DEVICES_KEY, NUM_OF_GPUS_KEY, GPU_PORTION_KEY)
"""The keys of `<prefix>-<n>` a shared container reads as env vars, in KAI's order."""


@dataclass(frozen=True, slots=True)
class FractionContainer:
    """The container a pod's GPU share is given to (KAI's `PodContainerRef`)."""

    index: int
    init: bool = False

    @property
    def key(self) -> str:
        """`<n>`, or `i<n>` for an init container: the part of the ConfigMap names it owns."""
        return f"i{self.index}" if self.init else str(self.index)


def fraction_container(
    annotations: Mapping[str, str], containers: Sequence[str], init_containers: Sequence[str]
) -> FractionContainer | None:
    """KAI's choice among the containers, given by name: the first regular container, or the
    one `gpu-fraction-container-name` names (init containers first); None if it names none."""
    if GPU_FRACTION_CONTAINER_ANNOTATION not in annotations:
        return FractionContainer(0)
    wanted = annotations[GPU_FRACTION_CONTAINER_ANNOTATION]
    for index, name in enumerate(init_containers):
        if name == wanted:
            return FractionContainer(index, init=True)
    for index, name in enumerate(containers):
        if name == wanted:
            return FractionContainer(index)
    return None


def device_config_maps(prefix: str, container: FractionContainer) -> tuple[str, str]:
    """The two ConfigMaps of a shared container: `<prefix>-<n>`, with the device and its
    portion, read key by key; and `<prefix>-<n>-evar`, whose keys all become env vars."""
    capabilities = f"{prefix}-{container.key}"
    return capabilities, f"{capabilities}-evar"


def pod_gpu_request(
    ref: ObjectRef,
    annotations: Mapping[str, str],
    spec: corev1.PodSpec,
    whole_devices: int,
    errors: list[ManifestError],
) -> GpuRequest:
    """`gpu_request` for a pod, and a share needs a container to go to (KAI's mutator refuses
    a pod whose `gpu-fraction-container-name` names none). Problems go to `errors`."""
    found_before = len(errors)
    request = gpu_request(ref, annotations, whole_devices, asks_for_whole_gpus(spec), errors)
    if request.is_fractional and fraction_container_of(annotations, spec) is None:
        errors.append(
            ref.error(
                _CONTAINER_FIELD,
                f"names no container or init container of the pod, got "
                f"{annotations[GPU_FRACTION_CONTAINER_ANNOTATION]!r}",
            )
        )
    return request if len(errors) == found_before else GpuRequest()


def fraction_container_of(
    annotations: Mapping[str, str], spec: corev1.PodSpec
) -> FractionContainer | None:
    """`fraction_container` among the containers of `spec`."""
    return fraction_container(
        annotations,
        [container.name for container in spec.containers],
        [container.name for container in spec.init_containers],
    )


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
    if annotations.get(MPS_ANNOTATION) == "true" and fraction_text is None and memory_text is None:
        errors.append(
            ref.error(
                _MPS_FIELD,
                f"needs {GPU_FRACTION_ANNOTATION} or {GPU_MEMORY_ANNOTATION}: MPS applies only "
                "to a shared device",
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
    if _POSITIVE_INTEGER.fullmatch(text) and 0 < int(text) <= MAX_GPUS_PER_NODE:
        return int(text)
    if _POSITIVE_INTEGER.fullmatch(text) and int(text) > 0:
        message = f"{text} devices; no node kai reads has more than {MAX_GPUS_PER_NODE:,}"
    else:
        message = f"must be a positive whole number, got {text!r}"
    errors.append(ref.error(_DEVICES_FIELD, message))
    return 1


def _memory_mib(ref: ObjectRef, text: str, errors: list[ManifestError]) -> int:
    if _POSITIVE_INTEGER.fullmatch(text) and int(text) > 0:
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
    value = Fraction(text) if _DECIMAL.fullmatch(text) else None
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
