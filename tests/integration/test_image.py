"""kai's container image, run as users run it: `kai run` schedules a GPU Job and `kai webhook`
refuses a bad Queue, each in a container on the test control plane.

The image is the one `image/build.sh` built from this checkout (its tag carries a hash of the
build context, so a stale image or one built from another clone is never tested). Each
container runs as `manifests/deployment.yaml` asks a kubelet to run it: user 10001, a
read-only root filesystem with an empty /tmp, no capabilities, no privilege escalation, and
credentials in a read-only mount, as a Secret volume gives them (files mode 0644). Host
network stands in for the pod network: the containers reach kube-apiserver on the loopback
address and it reaches the webhook there.

Without podman or the image the tests are skipped, naming the build command; in CI they fail.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import shutil
import subprocess
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from kai_operator_support import (
    QUEUES,
    bound_pods,
    create_queue,
    delete_queue,
    gpu_job,
    pods_in,
    unique,
    wait_for,
)
from kai_webhook_support import Webhook, configurations_for, http_status, installed, refusal
from kubernetes_asyncio import client

from kai.admission.certs import webhook_certificate
from kai.testing.controlplane import ClusterAccess
from kai.testing.fakes import GpuNode, NodeFactory
from kai.testing.kubeconfig import write_kubeconfig
from kai.testing.processes import Child, free_loopback_port

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD = REPO_ROOT / "image" / "build.sh"
BUILD_COMMAND = "bash image/build.sh (or make image)"
MOUNT = Path("/etc/kai")
"""Where the credentials are mounted in the containers."""
OWNER_LABEL = "kai.test.owner"
"""The pid of the test process that started a container, to find containers it left behind."""
STOP_SECONDS = 30.0
# As image/build.sh runs podman, for the same reasons: crun fails on a cgroup v1 "hybrid"
# host, and podman's default rlimits (1048576) are above some machines' hard limits.
PODMAN_GLOBAL = ("--runtime", "runc")
ULIMITS = ("--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096")


def _podman() -> str | None:
    return shutil.which("podman")


def _image_ref() -> str:
    return subprocess.run(
        ["bash", str(BUILD), "--print-ref"], check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture(scope="module")
def image() -> str:
    """This checkout's image; skipped (failed in CI) when podman or the image is missing."""
    podman = _podman()
    ref = _image_ref()
    if podman is None:
        message = f"podman is not installed; {BUILD_COMMAND} installs it and builds {ref}"
    elif subprocess.run([podman, *PODMAN_GLOBAL, "image", "exists", ref], check=False).returncode:
        message = f"image {ref} is not built for this checkout; run {BUILD_COMMAND}"
    else:
        _remove_abandoned_containers(podman)
        return ref
    if os.environ.get("CI") == "true":  # CI must run these tests, not skip them
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def _remove_abandoned_containers(podman: str) -> None:
    """Remove containers whose test process is gone (killed before its `finally` ran);
    containers of a test session still running, e.g. another clone's, are left alone."""
    listing = subprocess.run(
        [
            podman,
            *PODMAN_GLOBAL,
            "ps",
            "--all",
            "--filter",
            f"label={OWNER_LABEL}",
            "--format",
            f'{{{{.Names}}}} {{{{index .Labels "{OWNER_LABEL}"}}}}',
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    for line in listing.splitlines():
        name, _, owner = line.partition(" ")
        if owner.isdigit() and not _running(int(owner)):
            _remove(podman, name)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, belongs to someone else
        return True
    return True


def _remove(podman: str, name: str) -> None:
    subprocess.run(
        [podman, *PODMAN_GLOBAL, "rm", "--force", "--ignore", "--time", "5", name],
        check=True,
        capture_output=True,
        timeout=120,
    )


def credentials(control_plane: ClusterAccess, directory: Path) -> Path:
    """The admin kubeconfig and its certificates, copied into `directory` with paths under
    MOUNT and readable by the container's user, as a Secret volume would hold them."""
    directory.mkdir(mode=0o755)
    source = yaml.safe_load(control_plane.kubeconfig.read_text())
    user = source["users"][0]["user"]
    files = {
        "ca.crt": source["clusters"][0]["cluster"]["certificate-authority"],
        "client.crt": user["client-certificate"],
        "client.key": user["client-key"],
    }
    for name, path in files.items():
        shutil.copyfile(path, directory / name)
    write_kubeconfig(
        directory / "kubeconfig",
        control_plane.server,
        MOUNT / "ca.crt",
        {"client-certificate": str(MOUNT / "client.crt"), "client-key": str(MOUNT / "client.key")},
    )
    for file in directory.iterdir():
        file.chmod(0o644)
    return directory


class Container:
    """One `podman run` of the image in the foreground, its output in a log file.

    SIGTERM to podman reaches the container's kai (PID 1), as a kubelet's stop does."""

    def __init__(self, podman: str, name: str, argv: Sequence[str], log: Path) -> None:
        self.podman = podman
        self.name = name
        self.child = Child(name, argv, log)

    def check_running(self) -> None:
        if self.child.exit_code() is not None:
            raise AssertionError(f"container {self.name} exited:\n{self.child.log_tail()}")

    def stop(self) -> int | None:
        """SIGTERM, then its exit code (None if it had to be killed)."""
        self.child.stop(STOP_SECONDS)
        return self.child.exit_code()


@contextlib.asynccontextmanager
async def running(
    image: str, args: Sequence[str], mount: Path, log: Path
) -> AsyncIterator[Container]:
    """The image with `args`, as the Deployment runs it; removed on exit, also on failure."""
    podman = _podman()
    assert podman is not None
    name = unique("kai-image-test")
    argv = [
        podman,
        *PODMAN_GLOBAL,
        "run",
        "--rm",
        f"--name={name}",
        f"--label={OWNER_LABEL}={os.getpid()}",
        "--network=host",
        *ULIMITS,
        "--user=10001:10001",
        "--read-only",
        "--read-only-tmpfs=false",  # only the /tmp below is writable, as in the Deployment
        "--tmpfs=/tmp",
        "--cap-drop=all",
        "--security-opt=no-new-privileges",
        f"--volume={mount}:{MOUNT}:ro",
        image,
        *args,
    ]
    container = Container(podman, name, argv, log)
    try:
        yield container
    finally:
        container.stop()
        _remove(podman, name)  # gone already (--rm) unless podman itself was stuck


def test_the_image_runs_as_the_deployment_expects(image: str) -> None:
    """Kubernetes' runAsNonRoot accepts only a numeric user it can check without the image's
    /etc/passwd, and manifests/deployment.yaml gives no command, only args."""
    podman = _podman()
    assert podman is not None
    inspected = subprocess.run(
        [podman, *PODMAN_GLOBAL, "image", "inspect", "--format", "json", image],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    config: dict[str, Any] = json.loads(inspected)[0]["Config"]
    assert config["User"] == "10001:10001"
    assert config["Entrypoint"] == ["kai"]


async def test_the_image_schedules_a_gpu_job_as_non_root_on_a_read_only_root(
    api: client.ApiClient,
    namespace: str,
    gpu_nodes: NodeFactory,
    control_plane: ClusterAccess,
    tmp_path: Path,
    image: str,
) -> None:
    queue, node = unique("image"), unique("gpu")
    await create_queue(api, queue)
    try:
        await gpu_nodes(GpuNode(name=node, gpus=2, gpu_memory_mib=40960))
        job = gpu_job("train", queue, parallelism=2, gpus=1, min_member=2)
        await client.BatchV1Api(api).create_namespaced_job(namespace, job)

        async def created() -> bool:
            return len(await pods_in(api, namespace)) == 2

        await wait_for("the Job's 2 pods", created)
        assert await bound_pods(api, namespace) == {}  # only the container can bind them

        identity, lease = unique("kai-image"), unique("kai-lease")
        liveness, metrics = free_loopback_port(), free_loopback_port()
        args = [
            "run",
            f"--kubeconfig={MOUNT / 'kubeconfig'}",
            "--period=0.5s",
            "--time-limit=0.5",
            f"--metrics-port={metrics}",
            f"--liveness-endpoint=http://127.0.0.1:{liveness}/healthz",
            f"--namespace={namespace}",
            f"--lease-name={lease}",
            f"--identity={identity}",
            "--lease-duration=15s",
            "--reservation-runtime-class=",
        ]
        mount = credentials(control_plane, tmp_path / "kube")
        async with running(image, args, mount, tmp_path / "scheduler.log") as scheduler:

            async def gang_bound() -> bool:
                scheduler.check_running()
                return len(await bound_pods(api, namespace)) == 2

            await wait_for("the Job's gang to be bound by the container", gang_bound, 180, 0.5)
            assert set((await bound_pods(api, namespace)).values()) == {node}
            leases = client.CoordinationV1Api(api)
            held = await leases.read_namespaced_lease(lease, namespace)
            assert held.spec.holder_identity == identity  # the container is who scheduled
            assert await http_status(f"http://127.0.0.1:{metrics}/readyz") == 200
            assert await http_status(f"http://127.0.0.1:{liveness}/healthz") == 200

            # A kubelet's stop: kai is PID 1 in the container and must still stop cleanly.
            assert scheduler.stop() == 0, scheduler.child.log_tail()
            released = await leases.read_namespaced_lease(lease, namespace)
            assert not released.spec.holder_identity
    finally:
        await delete_queue(api, queue)


async def test_the_image_serves_admission_as_non_root_on_a_read_only_root(
    api: client.ApiClient,
    namespace: str,
    control_plane: ClusterAccess,
    tmp_path: Path,
    image: str,
) -> None:
    mount = credentials(control_plane, tmp_path / "kube")
    certificate = webhook_certificate(["127.0.0.1", "localhost"], datetime.timedelta(days=1))
    certificate.serving.write(mount / "webhook")
    for file in mount.glob("webhook.*"):
        file.chmod(0o644)
    port, liveness = free_loopback_port(), free_loopback_port()
    args = [
        "webhook",
        f"--kubeconfig={MOUNT / 'kubeconfig'}",
        "--host=127.0.0.1",
        f"--port={port}",
        f"--cert-file={MOUNT / 'webhook.crt'}",
        f"--key-file={MOUNT / 'webhook.key'}",
        f"--liveness-endpoint=http://127.0.0.1:{liveness}/healthz",
        "--runtime-class=",
    ]
    good = unique("good")
    async with running(image, args, mount, tmp_path / "webhook.log") as container:

        async def live() -> bool:
            container.check_running()
            return await http_status(f"http://127.0.0.1:{liveness}/healthz") == 200

        await wait_for("the container's liveness probe", live, 120, 0.5)
        webhook = Webhook(container.child, port, liveness, certificate.ca)
        async with installed(api, configurations_for(webhook, namespace)):
            try:
                orphan = _queue(unique("orphan"), parentQueue=unique("missing"))

                async def refused() -> bool:  # the configurations take effect within a moment
                    said = await refusal(lambda: _create(api, orphan, dry_run=True))
                    return said is not None and "denied the request" in said  # by the webhook

                await wait_for("the webhook configurations to take effect", refused, 60)
                message = await refusal(lambda: _create(api, orphan))
                assert message is not None
                assert "denied" in message and "spec.parentQueue" in message, message
                assert orphan["spec"]["parentQueue"] in message
                assert await refusal(lambda: _create(api, _queue(good))) is None
            finally:
                await delete_queue(api, good)
        assert container.stop() == 0, container.child.log_tail()


def _queue(name: str, **spec: Any) -> dict[str, Any]:
    unlimited = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
    resources = {"gpu": unlimited, "cpu": unlimited, "memory": unlimited}
    return {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"resources": resources, **spec},
    }


async def _create(api: client.ApiClient, body: dict[str, Any], dry_run: bool = False) -> None:
    objects = client.CustomObjectsApi(api)
    if dry_run:
        await objects.create_cluster_custom_object(*QUEUES, body, dry_run="All")
    else:
        await objects.create_cluster_custom_object(*QUEUES, body)
