"""The README's install, run as a person would: its shell block under "Running it in a cluster",
line by line and verbatim, with the kubectl tests/tools/build.sh built at the control plane's
release, `KUBECONFIG` set to the test control plane's admin kubeconfig and the checkout as the
working directory. Then what that person would look at: `kubectl get queues`, `kubectl get pg`
and `kubectl get pods` once an in-process scheduler has placed a pod.

Which steps run, by rule (a step is a line, or each part of a line joined with `&&`):

- a step whose programs (each stage of a pipeline) are `kubectl` and `kai` runs, `kai` being
  the virtualenv's; `kubectl` steps must be `kubectl apply`, so that the test knows what
  they applied and removes it afterwards;
- a step run by `docker` is skipped and counts as succeeded, so what follows its `&&` still
  runs: it needs a Docker engine, which the test machine has not, and the image it builds
  only matters to the pods of the Deployments, which no kubelet runs here anyway (the image
  has its own test);
- any other program fails the test: the README gained a step this test does not know.

The control plane is shared with the tests that run after this one, so everything the
install created is deleted afterwards, and nothing it found already there: the webhook
configurations first (their failurePolicy is Fail and their Service has no pods behind it;
they are deleted as soon as they have been checked, before anything else is created),
then the Deployments and their pods, the other namespaced objects, the cluster-wide ones,
and last the namespaces, waited for until they are gone.
"""

from __future__ import annotations

import itertools
import json
import re
import shlex
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kai_operator_support import (
    get_queue,
    gpu_pod,
    list_pod_groups,
    operator_config,
    running_operator,
    unique,
    wait_for,
)
from kai_readme_support import Shell, readme_block
from kubernetes_asyncio import client

from kai.api.constants import POD_GROUP_ANNOTATION
from kai.testing.controlplane import ClusterAccess
from kai.testing.fakes import GpuNode, NodeFactory, set_pod_phase

REPO_ROOT = Path(__file__).resolve().parents[2]
README = REPO_ROOT / "README.md"
SECTION = "## Running it in a cluster"
RUN = {"kubectl", "kai"}
SKIP = {"docker": "needs a Docker engine"}
WEBHOOK = "kai-webhook"
WEBHOOK_CONFIGURATIONS = (
    f"validatingwebhookconfiguration.admissionregistration.k8s.io/{WEBHOOK}",
    f"mutatingwebhookconfiguration.admissionregistration.k8s.io/{WEBHOOK}",
)
GPU = "nvidia.com/gpu"


def install_lines(readme: str = "") -> list[str]:
    """The commands of the first code block under the README's install heading."""
    return readme_block(SECTION, readme)


@dataclass(frozen=True)
class Step:
    """One command of a README line, and the programs of its pipeline's stages."""

    command: str
    programs: tuple[str, ...]

    @property
    def skip_reason(self) -> str | None:
        skipped = [SKIP[program] for program in self.programs if program in SKIP]
        return skipped[0] if skipped else None


def steps(line: str) -> list[Step]:
    found = []
    for command in line.split("&&"):
        stages = [shlex.split(stage, comments=True) for stage in command.split("|")]
        programs = tuple(stage[0] for stage in stages if stage)
        unknown = [p for p in programs if p not in RUN and p not in SKIP]
        assert not unknown, (
            f"README step {command.strip()!r} runs {unknown}, which this test neither runs "
            "nor skips: teach it the step"
        )
        kubectl = [stage for stage in stages if stage and stage[0] == "kubectl"]
        for stage in kubectl:
            assert stage[1:2] == ["apply"], (
                f"README step {command.strip()!r}: only `kubectl apply` is run, so that what "
                "it applied can be found and removed"
            )
        found.append(Step(command.strip(), programs))
    return found


@dataclass(frozen=True)
class Applied:
    """An object the install applies, as kubectl names it (`deployment.apps/kai-scheduler`)."""

    key: str
    namespace: str | None
    kind: str


def _objects(text: str) -> Iterator[Applied]:
    for manifest in yaml.safe_load_all(text):
        if not manifest:
            continue
        if manifest["kind"].endswith("List"):
            for item in manifest.get("items") or []:
                yield from _objects(yaml.safe_dump(item))
            continue
        group = manifest["apiVersion"].rpartition("/")[0]
        kind = manifest["kind"]
        resource = kind.lower() + (f".{group}" if group else "")
        metadata = manifest["metadata"]
        yield Applied(f"{resource}/{metadata['name']}", metadata.get("namespace"), kind)


async def inventory(shell: Shell, step: Step) -> list[Applied]:
    """What a `kubectl apply` step applies: its `-f` files and folders, and what the stages
    before it write to its stdin (`-f -`), which are run once more to read it."""
    stages = step.command.split("|")
    words = shlex.split(stages[-1], comments=True)
    found: list[Applied] = []
    for flag, value in itertools.pairwise(words):
        if flag not in ("-f", "--filename"):
            continue
        if value == "-":
            found.extend(_objects(await shell.run("|".join(stages[:-1]))))
            continue
        path = REPO_ROOT / value
        files = (
            sorted(path.glob("*.yaml")) + sorted(path.glob("*.json")) if path.is_dir() else [path]
        )
        for file in files:
            found.extend(_objects(file.read_text()))
    return found


async def existing(shell: Shell, objects: list[Applied]) -> set[str]:
    """The keys of those objects that exist."""
    found: set[str] = set()
    namespaces = {obj.namespace or "default" for obj in objects}
    for namespace in sorted(namespaces):
        keys = [obj.key for obj in objects if (obj.namespace or "default") == namespace]
        out = await shell.kubectl("get", "-n", namespace, "--ignore-not-found", "-o", "name", *keys)
        found.update(out.split())
    return found


async def remove(shell: Shell, created: list[Applied]) -> list[str]:
    """Delete what the install created, in an order that leaves no webhook in the way and no
    namespace terminating; the errors, not raised, so that every step is tried."""

    def rank(obj: Applied) -> int:
        if obj.kind.endswith("WebhookConfiguration"):
            return 0
        if obj.kind == "Deployment":
            return 1
        if obj.kind == "Namespace":
            return 4
        return 2 if obj.namespace else 3

    errors = []
    for step in range(5):
        batch = [obj for obj in created if rank(obj) == step]
        for namespace in sorted({obj.namespace or "" for obj in batch}):
            keys = [obj.key for obj in batch if (obj.namespace or "") == namespace]
            args = ["delete", "--ignore-not-found", "--wait=true", "--timeout=90s"]
            args += ["--cascade=foreground"] if step == 1 else []
            args += ["-n", namespace] if namespace else []
            try:
                await shell.kubectl(*args, *keys)
            except (AssertionError, TimeoutError) as error:
                errors.append(str(error) or f"kubectl {shlex.join(args)} timed out")
    return errors


def table(output: str) -> list[dict[str, str]]:
    """kubectl's table as rows of header -> cell, cut at the columns' starts (cells may be
    empty, and headers and cells may hold single spaces)."""
    header, *lines = output.rstrip("\n").splitlines()
    starts = [match.start() for match in re.finditer(r"\S+(?: \S+)*", header)]
    names = [header[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
    return [
        {
            name: line[a:b].strip()
            for name, a, b in zip(names, starts, [*starts[1:], None], strict=True)
        }
        for line in lines
    ]


def row(rows: list[dict[str, str]], name: str) -> dict[str, str]:
    matching = [r for r in rows if r["NAME"] == name]
    assert len(matching) == 1, f"{name} not in {[r['NAME'] for r in rows]}"
    return matching[0]


def test_install_lines_are_read_from_the_readme() -> None:
    lines = install_lines()
    assert lines[0] == "kubectl apply -f crds/"
    assert any(line.startswith("docker build") for line in lines)
    block = (
        "intro\n\n## Running it in a cluster\n\n```sh\nkubectl apply -f a\n\nkai x\n```\n\n## Next"
    )
    assert install_lines(block) == ["kubectl apply -f a", "kai x"]
    skipped, applied = steps("docker build -t x . && kubectl apply -f manifests/deployment.yaml")
    assert skipped.skip_reason and applied.skip_reason is None
    piped = steps("kai webhook-certs -f w.yaml | kubectl apply -f -    # admission webhook")
    assert piped[0].programs == ("kai", "kubectl")


async def test_readme_install_runs_and_kubectl_shows_what_a_person_needs(
    api: client.ApiClient,
    namespace: str,
    gpu_nodes: NodeFactory,
    control_plane: ClusterAccess,
    kubectl: Path,
) -> None:
    shell = Shell([kubectl], control_plane.kubeconfig)
    assert (await shell.run("command -v kubectl")).strip() == str(kubectl)
    assert (await shell.run("command -v kai")).strip() == str(Path(sys.executable).parent / "kai")
    versions = json.loads(await shell.kubectl("version", "-o", "json"))
    assert versions["clientVersion"]["gitVersion"] == versions["serverVersion"]["gitVersion"]
    leftover = await shell.kubectl(
        "get", "--ignore-not-found", "-o", "name", *WEBHOOK_CONFIGURATIONS
    )
    assert not leftover.strip(), f"webhook configurations left by another test: {leftover}"

    plan = [step for line in install_lines() for step in steps(line)]
    applies = {step.command: await inventory(shell, step) for step in plan if not step.skip_reason}
    everything = [obj for objects in applies.values() for obj in objects]
    before = await existing(shell, everything)
    created = [obj for obj in everything if obj.key not in before]
    try:
        reported: list[str] = []
        for step in plan:
            if step.skip_reason:
                shell.log.append(f"# skipped ({step.skip_reason}): {step.command}")
                continue
            out = await shell.run(step.command)
            reported += [line.split()[0] for line in out.splitlines() if line.endswith(" created")]
        # kubectl says it created exactly what was not there, so the clean-up misses nothing.
        assert sorted(reported) == sorted(obj.key for obj in created), "\n".join(shell.log)
        assert await existing(shell, everything) == {obj.key for obj in everything}

        # The webhook-certs line filled every caBundle; then the configurations go, as the
        # Service they call has no pods here.
        for configuration in WEBHOOK_CONFIGURATIONS:
            bundles = await shell.kubectl(
                "get", configuration, "-o", "jsonpath={.webhooks[*].clientConfig.caBundle}"
            )
            assert bundles.split() and all(len(b) > 100 for b in bundles.split())
        await shell.kubectl("delete", "--wait=true", *WEBHOOK_CONFIGURATIONS)

        await _look_as_a_person_would(shell, api, namespace, gpu_nodes, control_plane)
    finally:
        errors = await remove(shell, created)
        left = await existing(shell, created)
        leftover = await shell.kubectl(
            "get", "--ignore-not-found", "-o", "name", *WEBHOOK_CONFIGURATIONS
        )
        assert not errors and not left and not leftover.strip(), (
            f"clean-up failed: {errors}; left: {sorted(left)} {leftover}"
        )


async def _look_as_a_person_would(
    shell: Shell,
    api: client.ApiClient,
    namespace: str,
    gpu_nodes: NodeFactory,
    control_plane: ClusterAccess,
) -> None:
    """A pod placed by the scheduler and a gang too big for the cluster, seen with kubectl."""
    node = unique("gpu")
    await gpu_nodes(GpuNode(name=node, gpus=2, gpu_memory_mib=40960))
    core = client.CoreV1Api(api)
    async with running_operator(operator_config(control_plane.kubeconfig, namespace)):
        await core.create_namespaced_pod(namespace, gpu_pod("trainer", "default-queue", gpus=1))
        await core.create_namespaced_pod(namespace, gpu_pod("too-big", "default-queue", gpus=4))

        async def written() -> bool:
            groups = {
                g["metadata"]["name"]: g.get("status") or {}
                for g in await list_pod_groups(api, namespace)
            }
            pods = {p.metadata.name: p for p in (await core.list_namespaced_pod(namespace)).items}
            names = {
                name: (pod.metadata.annotations or {}).get(POD_GROUP_ANNOTATION)
                for name, pod in pods.items()
            }
            if not all(names.values()) or set(names.values()) - set(groups):
                return False
            trainer, too_big = groups[str(names["trainer"])], groups[str(names["too-big"])]
            queue = (await get_queue(api, "default-queue")).get("status") or {}
            parent = (await get_queue(api, "default-parent-queue")).get("status") or {}
            return (
                pods["trainer"].spec.node_name == node
                and _gpu(trainer, "allocated") == "1"
                and bool(too_big.get("schedulingConditions"))
                and _gpu(too_big, "requested") == "4"
                and (queue.get("allocated") or {}).get(GPU) == "1"
                and bool(queue.get("fairShare"))
                and parent.get("childQueues") == ["default-queue"]
            )

        await wait_for("the pod bound and the statuses written", written)
        await set_pod_phase(api, namespace, "trainer", "Running")  # as its kubelet would

        # Queues: KAI's columns (Priority, Parent, Children, DisplayName) and the GPUs.
        queues = await shell.kubectl("get", "queues")
        assert re.match(
            r"NAME +PRIORITY +PARENT +CHILDREN +DISPLAYNAME +GPU-QUOTA +GPU-LIMIT +"
            r"GPU-ALLOCATED +AGE\n",
            queues,
        ), queues
        rows = table(queues)
        parent, leaf = row(rows, "default-parent-queue"), row(rows, "default-queue")
        assert parent["CHILDREN"] == '["default-queue"]', queues
        assert (parent["PARENT"], leaf["PARENT"]) == ("", "default-parent-queue"), queues
        assert (leaf["GPU-QUOTA"], leaf["GPU-LIMIT"]) == ("0", "-1"), queues
        assert parent["GPU-ALLOCATED"] == leaf["GPU-ALLOCATED"] == "1", queues  # the subtree's
        wide = table(await shell.kubectl("get", "queues", "-o", "wide"))
        leaf_wide = row(wide, "default-queue")
        assert leaf_wide["GPU-REQUESTED"] == "5", wide  # the Pending pod asks too
        fair_share = ((await get_queue(api, "default-queue"))["status"]["fairShare"])[GPU]
        assert leaf_wide["GPU-FAIRSHARE"] == fair_share, wide

        # PodGroups: the queue, the gang size, the GPUs held and asked for, why not scheduled.
        groups = {g["metadata"]["name"]: g for g in await list_pod_groups(api, namespace)}
        pods = {p.metadata.name: p for p in (await core.list_namespaced_pod(namespace)).items}
        trainer_group = pods["trainer"].metadata.annotations[POD_GROUP_ANNOTATION]
        big_group = pods["too-big"].metadata.annotations[POD_GROUP_ANNOTATION]
        reason = groups[big_group]["status"]["schedulingConditions"][0]["reasons"][0]
        pg = await shell.kubectl("get", "pg", "-n", namespace)
        assert re.match(
            r"NAME +QUEUE +MINMEMBER +PRIORITYCLASS +GPU-ALLOCATED +GPU-REQUESTED +"
            r"REASON +AGE\n",
            pg,
        ), pg
        rows = table(pg)
        placed, waiting = row(rows, trainer_group), row(rows, big_group)
        assert placed["QUEUE"] == waiting["QUEUE"] == "default-queue", pg
        assert placed["MINMEMBER"] == waiting["MINMEMBER"] == "1", pg
        assert (placed["GPU-ALLOCATED"], placed["GPU-REQUESTED"]) == ("1", "1"), pg
        assert (waiting["GPU-ALLOCATED"], waiting["GPU-REQUESTED"]) == ("0", "4"), pg
        assert placed["REASON"] == "" and waiting["REASON"] == reason["reason"], pg
        assert reason["reason"], pg
        wide = table(await shell.kubectl("get", "pg", "-n", namespace, "-o", "wide"))
        assert row(wide, big_group)["MESSAGE"] == reason["message"] and reason["message"], wide

        # Pods: where the scheduler put them.
        pods_table = await shell.kubectl("get", "pods", "-n", namespace, "-o", "wide")
        rows = table(pods_table)
        assert (row(rows, "trainer")["STATUS"], row(rows, "trainer")["NODE"]) == (
            "Running",
            node,
        ), pods_table
        assert (row(rows, "too-big")["STATUS"], row(rows, "too-big")["NODE"]) == (
            "Pending",
            "<none>",
        ), pods_table


def _gpu(status: dict[str, Any], which: str) -> str | None:
    return ((status.get("resourcesStatus") or {}).get(which) or {}).get(GPU)
