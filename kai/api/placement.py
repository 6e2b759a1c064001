"""Where a pod may run: its nodeSelector, required node affinity and tolerations.

Kubernetes' rules are kept exactly: affinity terms are ORed and the requirements in
a term ANDed; a `matchFields` requirement can only name `metadata.name` and becomes a
requirement on that key (the engine matches it against the node's name); a term with
no requirements matches no node. Preferred affinity is a score in kube-scheduler and
is not read here.
"""

from __future__ import annotations

from kai.api import corev1
from kai.api.errors import ManifestError, ObjectRef
from kai.api.fields import integer_or_none
from kai.engine.model import Placement, Requirement, Toleration

NODE_NAME_FIELD = "metadata.name"
"""The only field `matchFields` may name; requirements on it carry it as their key."""

_TERMS_PATH = (
    "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
)


def pod_placement(ref: ObjectRef, spec: corev1.PodSpec, errors: list[ManifestError]) -> Placement:
    """The pod's placement rules; each problem is appended to `errors`."""
    return Placement(
        node_selector=tuple(sorted(spec.node_selector.items())),
        affinity_terms=_affinity_terms(ref, spec.affinity, errors),
        tolerations=tuple(
            _toleration(ref, f"spec.tolerations[{index}]", toleration, errors)
            for index, toleration in enumerate(spec.tolerations)
        ),
    )


def _affinity_terms(
    ref: ObjectRef, affinity: corev1.Affinity | None, errors: list[ManifestError]
) -> tuple[tuple[Requirement, ...], ...]:
    required = affinity.node_affinity if affinity else None
    selector = required.required_during_scheduling_ignored_during_execution if required else None
    if selector is None:
        return ()
    return node_selector_terms(ref, _TERMS_PATH, selector, errors)


def node_selector_terms(
    ref: ObjectRef, path: str, selector: corev1.NodeSelector, errors: list[ManifestError]
) -> tuple[tuple[Requirement, ...], ...]:
    """A NodeSelector's terms (ORed, each ANDed), as a pod's node affinity or a volume's;
    `path`: where its `nodeSelectorTerms` are, for the errors appended to `errors`."""
    terms: list[tuple[Requirement, ...]] = []
    for index, term in enumerate(selector.node_selector_terms):
        at = f"{path}[{index}]"
        requirements = [
            _requirement(ref, f"{at}.matchExpressions[{i}]", expression, errors)
            for i, expression in enumerate(term.match_expressions)
        ] + [
            _field_requirement(ref, f"{at}.matchFields[{i}]", expression, errors)
            for i, expression in enumerate(term.match_fields)
        ]
        # An empty term matches no node, so in an OR it adds nothing and can be left out.
        if requirements:
            terms.append(tuple(requirements))
    if not terms:
        errors.append(ref.error(path, "every term is empty, so no node can match"))
    return tuple(terms)


def _requirement(
    ref: ObjectRef,
    path: str,
    expression: corev1.NodeSelectorRequirement,
    errors: list[ManifestError],
) -> Requirement:
    values = tuple(expression.values)
    operator = expression.operator
    if operator in ("In", "NotIn") and not values:
        errors.append(ref.error(f"{path}.values", f"{operator} needs at least one value"))
    elif operator in ("Exists", "DoesNotExist") and values:
        errors.append(ref.error(f"{path}.values", f"{operator} takes no values"))
    elif operator in ("Gt", "Lt") and (len(values) != 1 or integer_or_none(values[0]) is None):
        errors.append(ref.error(f"{path}.values", f"{operator} needs exactly one integer value"))
    return Requirement(expression.key, operator, values)


def _field_requirement(
    ref: ObjectRef,
    path: str,
    expression: corev1.NodeSelectorRequirement,
    errors: list[ManifestError],
) -> Requirement:
    if expression.key != NODE_NAME_FIELD:
        errors.append(ref.error(f"{path}.key", f"only {NODE_NAME_FIELD} is supported"))
    if expression.operator not in ("In", "NotIn"):
        errors.append(ref.error(f"{path}.operator", "only In and NotIn are supported"))
    if len(expression.values) != 1:
        errors.append(ref.error(f"{path}.values", "needs exactly one node name"))
    return Requirement(NODE_NAME_FIELD, expression.operator, tuple(expression.values))


def _toleration(
    ref: ObjectRef, path: str, toleration: corev1.Toleration, errors: list[ManifestError]
) -> Toleration:
    operator = toleration.operator or "Equal"
    if operator == "Exists" and toleration.value:
        errors.append(ref.error(f"{path}.value", "must be empty when the operator is Exists"))
    if operator == "Equal" and not toleration.key:
        errors.append(ref.error(f"{path}.key", "an empty key needs the operator Exists"))
    return Toleration(
        key=toleration.key or None,
        operator=operator,
        value=toleration.value or None,
        effect=toleration.effect or None,
    )
