"""A node pool's scheduler without Helm: docs/operator.md's command, run verbatim.

`manifests/node-pool/deployment-patch.yaml` turns `manifests/deployment.yaml` (the
default shard) into pool `a`'s Deployment. Applied to the control plane, it must be
its own Deployment (a name and a selector of its own, so neither adopts the other's
pods, and its own anti-affinity), run `kai run` with the default shard's arguments
plus `--node-pool=a` (read by kai's own parser: the shard of pool `a`, Lease
`kai-scheduler-a`), and be the same Deployment otherwise: compared, as the API
server defaulted both, with the default shard's, applied beside it (and removed
after, unless it was there before). No kubelet runs their pods.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from kai_operator_support import ensure_namespace
from kai_readme_support import REPO_ROOT, Shell, readme_block
from kubernetes_asyncio import client

from kai.api.shards import Shard
from kai.cli.main import build_parser
from kai.testing.controlplane import ClusterAccess

DOCS = REPO_ROOT / "docs" / "operator.md"
HEADING = "### Shards: `--node-pool`"
NAME_LABEL = "app.kubernetes.io/name"


async def test_the_documented_pool_deployment_is_the_default_one_for_pool_a(
    api: client.ApiClient, kubectl: Path, control_plane: ClusterAccess
) -> None:
    (command,) = readme_block(HEADING, DOCS.read_text())
    base = yaml.safe_load((REPO_ROOT / "manifests" / "deployment.yaml").read_text())
    namespace = base["metadata"]["namespace"]
    await ensure_namespace(api, namespace)
    shell = Shell([kubectl], control_plane.kubeconfig)
    apps = client.AppsV1Api(api)
    get = (
        "get",
        "deployment",
        "kai-scheduler",
        "-n",
        namespace,
        "--ignore-not-found",
        "-o",
        "name",
    )
    created = ["kai-scheduler-a"] + (
        [] if (await shell.kubectl(*get)).strip() else ["kai-scheduler"]
    )
    try:
        await shell.run(command)
        await shell.kubectl("apply", "-f", "manifests/deployment.yaml")  # to compare with
        pool, default = [
            api.sanitize_for_serialization(await apps.read_namespaced_deployment(name, namespace))
            for name in ("kai-scheduler-a", "kai-scheduler")
        ]
        spec: dict[str, Any] = pool["spec"]
        pod_spec = spec["template"]["spec"]
        (term,) = pod_spec["affinity"]["podAntiAffinity"][
            "preferredDuringSchedulingIgnoredDuringExecution"
        ]
        (container,) = pod_spec["containers"]
        own = {NAME_LABEL: "kai-scheduler-a"}
        assert pool["metadata"]["labels"] == own
        assert spec["selector"]["matchLabels"] == own  # neither adopts the other's pods
        assert spec["template"]["metadata"]["labels"] == own
        assert term["podAffinityTerm"]["labelSelector"]["matchLabels"] == own
        assert container["args"][-1] == "--node-pool=a"
        args = build_parser().parse_args(container["args"])
        shard = Shard(args.node_pool or None, args.node_pool_label)
        assert shard.pool == "a" and shard.lease_name(args.lease_name) == "kai-scheduler-a"
        # Otherwise the same Deployment: the pool's, those changes undone, is the default's.
        theirs = {NAME_LABEL: "kai-scheduler"}
        spec["selector"]["matchLabels"] = spec["template"]["metadata"]["labels"] = theirs
        term["podAffinityTerm"]["labelSelector"]["matchLabels"] = theirs
        container["args"].pop()
        assert spec == default["spec"]
    finally:
        await shell.kubectl(
            "delete", "deployment", *created, "-n", namespace,
            "--ignore-not-found", "--cascade=foreground", "--wait=true", "--timeout=90s",
        )  # fmt: skip
