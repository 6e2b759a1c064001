"""The ConfigMaps a pod cannot start without, as KAI's ConfigMap predicate reads them
(`kai.api.config_maps`), and that only a pod on no node waits for them
(`kai.api.dependencies`)."""

from __future__ import annotations

from typing import Any

from kai.api.config_maps import missing_message, required_config_maps
from kai.api.dependencies import depends

TOKEN_VOLUME = {
    "name": "kube-api-access-x1",
    "projected": {
        "sources": [
            {"serviceAccountToken": {"path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt"}]}},
        ]
    },
}


def _pod(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "ml"}, "spec": spec}


def _mounting(*names: str, **rest: Any) -> dict[str, Any]:
    return {"name": "c", "volumeMounts": [{"name": n, "mountPath": f"/{n}"} for n in names], **rest}


def test_every_container_kind_and_source_counts_unless_optional() -> None:
    manifest = _pod(
        initContainers=[{"name": "i", "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "init-env"}}}]}],
        containers=[
            _mounting("kube-api-access-x1", "cfg", envFrom=[{"configMapRef": {"name": "bulk"}}]),
            {"name": "d", "envFrom": [{"configMapRef": {"name": "maybe", "optional": True}}]},
        ],
        ephemeralContainers=[{"name": "e", "envFrom": [{"configMapRef": {"name": "debug"}}]}],
        volumes=[
            TOKEN_VOLUME,
            {"name": "cfg", "configMap": {"name": "app"}},
            {"name": "unmounted", "configMap": {"name": "spare"}},
            {"name": "soft", "configMap": {"name": "soft", "optional": True}},
        ],
    )  # fmt: skip
    # kube-root-ca.crt, which the token volume mounts, is taken as there: not required.
    assert required_config_maps(manifest) == ("app", "bulk", "debug", "init-env")


def test_a_pod_without_references_requires_none() -> None:
    assert required_config_maps(_pod(containers=[{"name": "c"}])) == ()
    assert required_config_maps({"spec": "broken"}) == ()


def test_the_message_names_only_the_missing_ones() -> None:
    assert missing_message("ml", ("a", "b", "c"), {"ml/b", "other/a"}) == (
        "missing required ConfigMaps in namespace ml: a, c"
    )
    assert missing_message("ml", ("a",), {"ml/a"}) is None


def test_only_a_pod_on_no_node_waits_for_its_config_maps() -> None:
    volume = {"name": "cfg", "configMap": {"name": "app"}}
    pending = _pod(containers=[_mounting("cfg")], volumes=[volume])
    assert depends(pending)
    assert not depends({**pending, "spec": {**pending["spec"], "nodeName": "n1"}})


def test_a_pod_with_only_its_api_token_volume_depends_on_nothing() -> None:
    """So the live scheduler keeps its parse from cycle to cycle, as any pod's."""
    token_only = _pod(containers=[_mounting("kube-api-access-x1")], volumes=[TOKEN_VOLUME])
    assert not depends(token_only)
