"""The pod grouper: which PodGroup a pod belongs to (kai-semantics §14.2-§14.5).

Pure: the caller resolves the owner chain and passes the definitions and the
cluster's priority classes. The rule is chosen by the top owner's kind: a built-in
rule for the exact version, then for any version of the kind, then the workload
definition's gang instructions, then the default grouper (one group per top owner,
minimum 1). Two kinds delegate first: a CronJob groups as the Job it created, and
the skip-top-owner kinds (Argo Workflow, TrainJob, Dynamo, Run:ai workloads) group
as the owner below them, which inherits their labels and annotations.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kai.api.constants import BUILD_PRIORITY_CLASS, INFERENCE_PRIORITY_CLASS
from kai.api.shapes import naming_unreadable
from kai.api.shards import NODE_POOL_LABEL_KEY
from kai.grouping.context import GroupingInput
from kai.grouping.plan import GroupDecision, PodGroupPlan, build_plan, default_group_name
from kai.grouping.rules_batch import job_rule, jobset_rule
from kai.grouping.rules_definition import definition_rule
from kai.grouping.rules_grove import podcliqueset_rule
from kai.grouping.rules_ray import ray_rule
from kai.grouping.rules_serving import leaderworkerset_rule, per_pod_rule
from kai.grouping.rules_training import training_rule
from kai.workloads.objects import annotations_of, gvk_of, labels_of, object_ref
from kai.workloads.registry import DefinitionRegistry

SKIP_PODGROUPER_ANNOTATION = "kai.scheduler/skip-podgrouper"
SPARK_APP_NAME_LABEL = "spark-app-name"
SPARK_APP_SELECTOR_LABEL = "spark-app-selector"

Rule = Callable[[GroupingInput], GroupDecision]
ANY_VERSION = "*"


def _default_rule(priority_class: str | None = None) -> Rule:
    def rule(inp: GroupingInput) -> GroupDecision:
        decision = GroupDecision(name=default_group_name(inp.top))
        if priority_class is None:
            return decision
        return GroupDecision(name=decision.name, default_priority_class=priority_class)

    return rule


def _pod_rule(inp: GroupingInput) -> GroupDecision:
    """An owner-less pod is its own top owner; Spark pods group by their application."""
    pod_labels = labels_of(inp.top)
    selector = pod_labels.get(SPARK_APP_SELECTOR_LABEL)
    if selector and pod_labels.get(SPARK_APP_NAME_LABEL):
        return GroupDecision(name=selector)
    return GroupDecision(name=default_group_name(inp.top))


NATIVE_RULES: dict[tuple[str, str, str], Rule] = {
    ("", "Pod", "v1"): _pod_rule,
    ("apps", "Deployment", "v1"): per_pod_rule,
    ("apps", "ReplicaSet", "v1"): _default_rule(),
    ("apps", "StatefulSet", "v1"): _default_rule(),
    ("batch", "Job", "v1"): job_rule,
    ("jobset.x-k8s.io", "JobSet", "v1alpha2"): jobset_rule,
    ("kubeflow.org", "PyTorchJob", "v1"): training_rule,
    ("kubeflow.org", "TFJob", "v1"): training_rule,
    ("kubeflow.org", "XGBoostJob", "v1"): training_rule,
    ("kubeflow.org", "JAXJob", "v1"): training_rule,
    ("kubeflow.org", "MPIJob", "v1"): training_rule,
    ("kubeflow.org", "MPIJob", "v2beta1"): training_rule,
    ("kubeflow.org", "Notebook", ANY_VERSION): _default_rule(BUILD_PRIORITY_CLASS),
    ("ray.io", "RayCluster", "v1"): ray_rule,
    ("ray.io", "RayCluster", "v1alpha1"): ray_rule,
    ("ray.io", "RayJob", "v1"): ray_rule,
    ("ray.io", "RayJob", "v1alpha1"): ray_rule,
    ("ray.io", "RayService", "v1"): ray_rule,
    ("ray.io", "RayService", "v1alpha1"): ray_rule,
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet", "v1"): leaderworkerset_rule,
    ("grove.io", "PodCliqueSet", ANY_VERSION): podcliqueset_rule,
    ("serving.knative.dev", "Service", "v1"): per_pod_rule,
    ("egx.nvidia.io", "SPOTRequest", ANY_VERSION): _default_rule(INFERENCE_PRIORITY_CLASS),
}
SKIP_TOP_OWNER_KINDS: frozenset[tuple[str, str]] = frozenset(
    {
        ("argoproj.io", "Workflow"),
        ("trainer.kubeflow.org", "TrainJob"),
        ("nvidia.com", "DynamoGraphDeployment"),
        ("run.ai", "TrainingWorkload"),
        ("run.ai", "InteractiveWorkload"),
        ("run.ai", "DistributedWorkload"),
        ("run.ai", "InferenceWorkload"),
        ("run.ai", "DistributedInferenceWorkload"),
    }
)
DELEGATE_TO_CHILD_KINDS: frozenset[tuple[str, str]] = frozenset({("batch", "CronJob")})


def plan_pod_group(
    pod: Mapping[str, Any],
    owner_chain: Sequence[Mapping[str, Any]],
    registry: DefinitionRegistry,
    priority_classes: Mapping[str, int],
    node_pool_label: str = NODE_POOL_LABEL_KEY,
) -> PodGroupPlan | None:
    """The PodGroup `pod` belongs to; None when the pod or an owner opts out.

    The group takes the pod's node pool under `node_pool_label` when the top owner
    names none (KAI's `addNodePoolLabel`, with its `nodePoolLabelKey`).

    `owner_chain` runs from the pod's controller owner up to the top owner (empty for
    an owner-less pod). A pod or owner annotated `kai.scheduler/skip-podgrouper: "true"`
    brings its own PodGroup, so there is nothing to plan. Raises GroupingError or
    ManifestError (naming the object and field) when the owner's spec is unusable; an
    owner whose values have a shape the rules cannot read is named as a whole.
    """
    top = owner_chain[-1] if owner_chain else pod
    with naming_unreadable(object_ref(top), top):
        if any(
            annotations_of(obj).get(SKIP_PODGROUPER_ANNOTATION) == "true"
            for obj in (pod, *owner_chain)
        ):
            return None
        inp = _delegated(GroupingInput(pod, tuple(owner_chain), registry))
        decision = _decide(inp)
        return build_plan(pod, inp.top, decision, priority_classes, node_pool_label)


def rule_for(api_version: str, kind: str) -> Rule | None:
    """The built-in rule for a top owner of this type, exact version first."""
    gvk = gvk_of({"apiVersion": api_version, "kind": kind})
    return NATIVE_RULES.get((gvk.group, gvk.kind, gvk.version)) or NATIVE_RULES.get(
        (gvk.group, gvk.kind, ANY_VERSION)
    )


def _delegated(inp: GroupingInput) -> GroupingInput:
    chain = list(inp.chain)
    if len(chain) >= 2:
        top_gvk = gvk_of(chain[-1])
        if (top_gvk.group, top_gvk.kind) in DELEGATE_TO_CHILD_KINDS:
            chain.pop()
        elif (top_gvk.group, top_gvk.kind) in SKIP_TOP_OWNER_KINDS:
            skipped = chain.pop()
            chain[-1] = _inherit(chain[-1], skipped)
    return GroupingInput(inp.pod, tuple(chain), inp.registry)


def _inherit(owner: Mapping[str, Any], skipped: Mapping[str, Any]) -> dict[str, Any]:
    """`owner` with the skipped owner's labels and annotations copied down (theirs win)."""
    meta = dict(owner.get("metadata") or {})
    meta["labels"] = {**labels_of(owner), **labels_of(skipped)}
    meta["annotations"] = {**annotations_of(owner), **annotations_of(skipped)}
    return {**owner, "metadata": meta}


def _decide(inp: GroupingInput) -> GroupDecision:
    top = inp.top
    rule = rule_for(str(top.get("apiVersion") or ""), str(top.get("kind") or ""))
    if rule is not None:
        return rule(inp)
    definition = inp.registry.get(gvk_of(top))
    if definition is not None and not definition.gang.is_empty:
        decision = definition_rule(inp, definition)
        if decision is not None:
            return decision
    return GroupDecision(name=default_group_name(top))
