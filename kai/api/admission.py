"""What an admission webhook decides about a Queue, a PodGroup or a pod, as pure functions.

KAI refuses bad Queues and PodGroups at admission and wires a GPU-sharing pod to its
device ConfigMaps there (kai-semantics §3.1, §3.2, §13.2). kai's webhook (`kai webhook`)
must decide exactly what the scheduler and `kai simulate` decide when they parse the same
objects, or a user would be told "accepted" by one and "invalid" by the other. So these
functions hold no rule of their own: they call the parsers (`parse_queue`,
`parse_pod_group`, `pod_gpu_request`) and the GPU-sharing names the binder uses, and only
add what admission sees that a parser does not: the other queues in the cluster, and the
mutation of a pod. No I/O, no clock; the one random part is the ConfigMap name's, as KAI's.

At admission an object may have no name yet (`generateName`); the rules here do not
depend on it, so such an object is judged under its name prefix.
"""

from __future__ import annotations

import copy
import re
import secrets
from collections.abc import Callable, Mapping
from typing import Any, Final

from pydantic import ValidationError

from kai.api import corev1
from kai.api.constants import SHARED_GPU_CONFIGMAP_ANNOTATION
from kai.api.errors import ManifestError, object_ref, validated
from kai.api.fields import WireModel
from kai.api.gpu_sharing import (
    DEVICE_ENV_VARS,
    GPU_ANNOTATIONS,
    FractionContainer,
    device_config_maps,
    fraction_container_of,
    pod_gpu_request,
)
from kai.api.podgroups import parse_pod_group
from kai.api.queues import declared_parent, parse_queue, queue_tree_errors
from kai.api.topologies import parse_topology
from kai.api.unhonoured import unhonoured_field
from kai.engine.unhonoured import unhonoured_message

_NAME_SUFFIX: Final = "shared-gpu"
_MAX_VOLUME_NAME: Final = 63
_RANDOM_LENGTH: Final = 7
_RANDOM_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"  # Kubernetes' utilrand: no vowels
_NOT_IN_VOLUME_NAME = re.compile(r"[^a-z0-9-]+")


def queue_admission_errors(
    manifest: Mapping[str, Any], existing: Mapping[str, Mapping[str, Any]]
) -> list[ManifestError]:
    """Every reason KAI's queue webhook (and kai) refuses this Queue on create/update.

    `existing` maps queue name -> manifest of the queues in the cluster; an old version of
    this queue among them is replaced by `manifest`. The rules: what `parse_queue` rejects,
    `spec.resources` among them (KAI's webhook requires the field and nothing in it: `{}`
    is a queue); and, where KAI's webhook checks nothing by default, the parent must exist
    and the new parent link must not close a cycle. Problems elsewhere in the tree are not
    this queue's and are not reported.
    """
    named = _named(manifest)
    ref = object_ref("Queue", named, namespaced=False)
    errors = _errors_of(lambda: parse_queue(named))
    parents = {name: declared_parent(queue) for name, queue in existing.items()}
    parents[ref.name] = declared_parent(named)
    errors += [error for error in queue_tree_errors(parents) if error.name == ref.name]
    return errors


def pod_group_admission_errors(manifest: Mapping[str, Any]) -> list[ManifestError]:
    """What `parse_pod_group` rejects: KAI's PodGroup webhook rules and the field types.

    minMember and minSubGroup exclude each other (also when one is 0), subgroup names are
    unique, parents exist, no cycles, a leaf needs minMember and takes no minSubGroup, a
    subgroup with children takes no minMember. Stricter than KAI, which only warns: a
    minSubGroup above the number of direct children (the gang could never start); and on
    update KAI downgrades minMember on a subgroup with children to a warning.
    """
    named = _named(manifest)
    return _errors_of(lambda: parse_pod_group(named, {}))


def topology_admission_errors(manifest: Mapping[str, Any]) -> list[ManifestError]:
    """What `parse_topology` rejects: KAI's webhook rules on aliases (unique, never a level's
    label) beside the CRD's own rules, which the API server has already applied."""
    named = _named(manifest)
    return _errors_of(lambda: parse_topology(named))


def pod_admission_errors(manifest: Mapping[str, Any]) -> list[ManifestError]:
    """The pod's GPU-request rules, as `parse_pod` checks them (KAI's `ValidateGpuRequests`).

    `gpu-fraction` a portion in (0, 1] or a whole number of devices, `gpu-memory` a
    positive whole number of MiB, not both and neither beside an `nvidia.com/gpu` request
    or limit, `gpu-fraction-num-devices` a positive whole number (at most
    `MAX_GPUS_PER_NODE`) and only with one of them, `mps: "true"` only with one of them,
    and `gpu-fraction-container-name` naming a container. A pod without GPU annotations
    -> []. Only the containers are read beyond the annotations: the rest of the pod is the
    API server's to check.
    """
    ref = object_ref("Pod", _named(manifest), namespaced=True)
    annotations = _annotations(manifest)
    if not any(name in annotations for name in GPU_ANNOTATIONS):
        return []
    try:
        spec = _containers(manifest)
    except ManifestError as error:
        return list(error.all_errors)
    errors: list[ManifestError] = []
    pod_gpu_request(ref, annotations, spec, 0, errors)
    return errors


def pod_admission_warnings(manifest: Mapping[str, Any]) -> list[str]:
    """What the pod's author should know before it waits: a requirement kai cannot honour
    yet leaves its gang pending (`kai.engine.unhonoured`). The API server has validated the
    pod before this webhook is called, so a spec that does not validate gets no warning."""
    try:
        spec = corev1.PodSpec.model_validate(_mapping(manifest.get("spec")))
    except ValidationError:
        return []
    field = unhonoured_field(spec)
    return [unhonoured_message(field)] if field is not None else []


def gpu_sharing_injection(
    manifest: Mapping[str, Any], runtime_class: str | None
) -> dict[str, Any] | None:
    """KAI's GPU-sharing pod mutation, or None when the pod asks for no share or is invalid.

    The new pod (the input is not touched) has what KAI's mutator gives it: the
    `runai/shared-gpu-configmap` annotation (kept when set, else KAI's generated prefix);
    on the share's container env `NVIDIA_VISIBLE_DEVICES`, `RUNAI_NUM_OF_GPUS` and
    `GPU_PORTION` from ConfigMap `<prefix>-<n>` and `envFrom` ConfigMap `<prefix>-<n>-evar`;
    that first ConfigMap as a pod volume (KAI mounts it nowhere); and, as KAI's runtime
    enforcement, `runtimeClassName` = `runtime_class` when the pod sets none. Applied to
    its own output it changes nothing. A pod `pod_admission_errors` refuses gets None.
    """
    return _injected(manifest, runtime_class, _random_part)


def config_map_prefix(
    manifest: Mapping[str, Any], container: FractionContainer, random_part: str
) -> str:
    """KAI's name prefix for a pod's GPU-sharing ConfigMaps: `<base>-<random>-shared-gpu`.

    The base is the pod's first owner's name, or the pod's own, cut so that the volume
    name `<prefix>-<n>-vol` and the ConfigMap `<prefix>-<n>-evar` stay within 63
    characters, with trailing dots and hyphens dropped. A pod that has neither yet
    (`generateName` and no owner) is named after its `generateName`, where KAI's would
    start with a hyphen, which no ConfigMap name may.
    """
    metadata = _mapping(manifest.get("metadata"))
    owners = metadata.get("ownerReferences")
    if isinstance(owners, list) and owners and isinstance(owners[0], Mapping):
        base = _text(owners[0].get("name"))
    else:
        base = _text(metadata.get("name"))
    base = base or _text(metadata.get("generateName"))
    # KAI's arithmetic, kept exact: an init container's "i" is not counted.
    longest = (
        _MAX_VOLUME_NAME
        - (_RANDOM_LENGTH + 6)
        - len(_NAME_SUFFIX)
        - (len(str(container.index)) + 1)
        - len("-evar")
    )
    base = base[:longest].rstrip(".-")
    return f"{base}-{random_part}-{_NAME_SUFFIX}" if base else f"{random_part}-{_NAME_SUFFIX}"


def config_volume_name(config_map: str) -> str:
    """The volume of a ConfigMap: `<name>-vol` made a DNS label (a ConfigMap name may hold dots)."""
    name = _NOT_IN_VOLUME_NAME.sub("-", f"{config_map}-vol".lower())
    return name.strip("-")


def _injected(
    manifest: Mapping[str, Any], runtime_class: str | None, random_part: Callable[[], str]
) -> dict[str, Any] | None:
    ref = object_ref("Pod", manifest, namespaced=True)
    annotations = _annotations(manifest)
    try:
        spec = _containers(manifest)
    except ManifestError:
        return None
    errors: list[ManifestError] = []
    request = pod_gpu_request(ref, annotations, spec, 0, errors)
    target = fraction_container_of(annotations, spec)
    if errors or not request.is_fractional or not spec.containers or target is None:
        return None
    pod: dict[str, Any] = _thawed(manifest)
    if not isinstance(pod.get("metadata"), dict):
        pod["metadata"] = {}
    metadata = pod["metadata"]
    if not isinstance(metadata.get("annotations"), dict):
        metadata["annotations"] = {}
    prefix = metadata["annotations"].get(SHARED_GPU_CONFIGMAP_ANNOTATION)
    if not prefix:
        prefix = config_map_prefix(manifest, target, random_part())
        metadata["annotations"][SHARED_GPU_CONFIGMAP_ANNOTATION] = prefix
    capabilities, direct_env = device_config_maps(prefix, target)
    pod_spec = pod["spec"]
    container = pod_spec["initContainers" if target.init else "containers"][target.index]

    # As KAI's AddEnvVarToContainer: a variable of the same name is replaced, at the end.
    kept = [var for var in _list(container.get("env")) if _name(var) not in DEVICE_ENV_VARS]
    container["env"] = kept + [
        {"name": name, "valueFrom": {"configMapKeyRef": {"key": name, "name": capabilities}}}
        for name in DEVICE_ENV_VARS
    ]
    sources = _list(container.get("envFrom"))
    if not any(_name(_mapping(source).get("configMapRef")) == direct_env for source in sources):
        sources.append({"configMapRef": {"name": direct_env, "optional": False}})
    container["envFrom"] = sources
    volume = config_volume_name(capabilities)
    volumes = [v for v in _list(pod_spec.get("volumes")) if _name(v) != volume]
    pod_spec["volumes"] = [*volumes, {"name": volume, "configMap": {"name": capabilities}}]
    if runtime_class and not pod_spec.get("runtimeClassName"):
        pod_spec["runtimeClassName"] = runtime_class
    return pod


class _PodContainers(WireModel):
    """The part of a pod the GPU rules read; the rest is the API server's to check."""

    spec: corev1.PodSpec = corev1.PodSpec()


def _containers(manifest: Mapping[str, Any]) -> corev1.PodSpec:
    """The pod's containers and init containers, read as `parse_pod` reads them."""
    ref = object_ref("Pod", manifest, namespaced=True)
    spec = _mapping(manifest.get("spec"))
    keys = ("containers", "initContainers")
    only = {"spec": {key: spec[key] for key in keys if key in spec}}
    return validated(_PodContainers, ref, only).spec


def _annotations(manifest: Mapping[str, Any]) -> dict[str, str]:
    annotations = _mapping(_mapping(manifest.get("metadata")).get("annotations"))
    return {key: value for key, value in annotations.items() if isinstance(value, str)}


def _named(manifest: Mapping[str, Any]) -> Mapping[str, Any]:
    """`manifest`, named after its `generateName` when the API server has not named it yet."""
    metadata = _mapping(manifest.get("metadata"))
    prefix = metadata.get("generateName")
    if metadata.get("name") or not isinstance(prefix, str) or not prefix:
        return manifest
    return {**manifest, "metadata": {**metadata, "name": prefix}}


def _errors_of(parse: Callable[[], object]) -> list[ManifestError]:
    try:
        parse()
    except ManifestError as error:
        return list(error.all_errors)
    return []


def _random_part() -> str:
    return "".join(secrets.choice(_RANDOM_ALPHABET) for _ in range(_RANDOM_LENGTH))


def _thawed(value: Any) -> Any:
    """A deep, mutable copy: mappings become dicts, lists stay lists."""
    if isinstance(value, Mapping):
        return {key: _thawed(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_thawed(item) for item in value]
    return copy.deepcopy(value)


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _list(value: object) -> list[Any]:
    return list(value) if isinstance(value, list) else []


def _name(value: object) -> object:
    return _mapping(value).get("name")
