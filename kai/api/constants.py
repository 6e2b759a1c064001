"""The label, annotation and resource names KAI reads and writes, and its built-in priority classes.

These strings are the wire contract with users and with KAI's own components
(kai-semantics §4, §5); keeping them in one place means a typo cannot make one
part of kai read a key another part never writes.
"""

from __future__ import annotations

from typing import Final

SCHEDULER_NAME: Final = "kai-scheduler"

# API versions of the objects kai parses.
QUEUE_API_VERSION: Final = "scheduling.run.ai/v2"
POD_GROUP_API_VERSION: Final = "scheduling.run.ai/v2alpha2"
PRIORITY_CLASS_API_VERSION: Final = "scheduling.k8s.io/v1"
CORE_API_VERSION: Final = "v1"
STORAGE_API_VERSION: Final = "storage.k8s.io/v1"

# Pod labels and annotations (kai-semantics §4.1, §4.2).
QUEUE_LABEL: Final = "kai.scheduler/queue"
SUBGROUP_LABEL: Final = "kai.scheduler/subgroup-name"
TASK_PRIORITY_LABEL: Final = "kai.scheduler/task-priority"
POD_GROUP_ANNOTATION: Final = "pod-group-name"
GPU_FRACTION_ANNOTATION: Final = "gpu-fraction"
GPU_MEMORY_ANNOTATION: Final = "gpu-memory"
GPU_FRACTION_NUM_DEVICES_ANNOTATION: Final = "gpu-fraction-num-devices"
GPU_FRACTION_CONTAINER_ANNOTATION: Final = "gpu-fraction-container-name"
MPS_ANNOTATION: Final = "mps"
SHARED_GPU_CONFIGMAP_ANNOTATION: Final = "runai/shared-gpu-configmap"
GPU_GROUP_LABEL: Final = "runai-gpu-group"
RESERVATION_NAMESPACE: Final = "kai-resource-reservation"
"""Where KAI's binder (and kai's, by default) keeps the pods that hold shared GPU devices."""
MULTI_GPU_GROUP_LABEL_PREFIX: Final = "runai-gpu-group/"

# Resources and node labels (kai-semantics §4.3).
NVIDIA_GPU_RESOURCE: Final = "nvidia.com/gpu"
MAX_GPUS_PER_NODE: Final = 4096
"""More devices than this on one node is a broken device plugin or a typo (the largest
machines carry 16): the scheduler ranks nodes by free devices in a table of that size, and
a node reporting 10^12 of them made every cycle fail for lack of memory. A share spans at
most as many devices."""
GPU_MEMORY_NODE_LABEL: Final = "nvidia.com/gpu.memory"

# Built-in PriorityClasses installed by KAI's Helm chart (kai-semantics §5).
TRAIN_PRIORITY_CLASS: Final = "train"
BUILD_PREEMPTIBLE_PRIORITY_CLASS: Final = "build-preemptible"
BUILD_PRIORITY_CLASS: Final = "build"
INFERENCE_PRIORITY_CLASS: Final = "inference"
BUILT_IN_PRIORITY_CLASSES: Final[tuple[tuple[str, int], ...]] = (
    (TRAIN_PRIORITY_CLASS, 50),
    (BUILD_PREEMPTIBLE_PRIORITY_CLASS, 75),
    (BUILD_PRIORITY_CLASS, 100),
    (INFERENCE_PRIORITY_CLASS, 125),
)


def default_priority_classes() -> dict[str, int]:
    """The built-in classes by name, as a fresh dict a caller may extend with the cluster's own."""
    return dict(BUILT_IN_PRIORITY_CLASSES)
