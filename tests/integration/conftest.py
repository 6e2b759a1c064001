"""Fixtures that run integration tests against a real Kubernetes control plane.

One control plane (etcd, kube-apiserver, kube-controller-manager) starts per
test session; each test gets its own namespace. Without the built programs
the tests are skipped locally and fail in CI, naming the build command.

Each async test runs under an asyncio deadline (`TEST_DEADLINE_SECONDS`), shorter
than pytest-timeout's: at the deadline the test is cancelled, so its `finally`
blocks and context managers run and the operators it started are stopped. When
pytest-timeout fires instead, it interrupts the event loop and leaves the test's
tasks (operators) running into the next tests, which it must never have to do.
"""

from __future__ import annotations

import asyncio
import functools
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import pytest_asyncio
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from kai.testing.binaries import Binaries, BinariesMissingError, locate_binaries, locate_tool
from kai.testing.controlplane import ClusterAccess, ControlPlane
from kai.testing.fakes import GpuNode, NodeFactory, create_gpu_node
from kai.testing.faultproxy import FaultProxy
from kai.testing.invariants import InvariantWatcher

REPO_ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
TEST_DEADLINE_SECONDS = 300.0
_T = TypeVar("_T")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run this folder's async tests in the session's event loop.

    The API client is session-scoped and its connections belong to one loop.
    """
    session_loop = pytest.mark.asyncio(loop_scope="session")
    for item in items:
        if pytest_asyncio.is_async_test(item) and HERE in Path(item.path).parents:
            item.add_marker(session_loop, append=False)
            item.add_marker(pytest.mark.integration)
            assert isinstance(item, pytest.Function)
            item.obj = _with_deadline(item.obj)


def _with_deadline(test: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
    @functools.wraps(test)
    async def bounded(*args: Any, **kwargs: Any) -> None:
        deadline = asyncio.timeout(TEST_DEADLINE_SECONDS)
        try:
            async with deadline:
                await test(*args, **kwargs)
        except TimeoutError:
            if deadline.expired():
                pytest.fail(f"test cancelled at its {TEST_DEADLINE_SECONDS:g}s deadline")
            raise

    return bounded


def _or_skip(locate: Callable[[], _T]) -> _T:
    """What `locate` finds; skipped when it is not built, failed in CI (which must run it)."""
    try:
        return locate()
    except BinariesMissingError as err:
        message = str(err)
    if os.environ.get("CI") == "true":  # CI must run these tests, not skip them
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def _binaries_or_skip() -> Binaries:
    return _or_skip(lambda: locate_binaries(REPO_ROOT))


@pytest.fixture(scope="session")
def kubectl() -> Path:
    """The kubectl tests/tools/build.sh built (the control plane's release); skipped if not
    built (failed in CI)."""
    return _or_skip(lambda: locate_tool(REPO_ROOT, "kubectl"))


@pytest.fixture(scope="session")
def helm() -> Path:
    """The helm tests/tools/build.sh built; skipped if not built (failed in CI)."""
    return _or_skip(lambda: locate_tool(REPO_ROOT, "helm"))


@pytest.fixture(scope="session")
def control_plane_processes() -> Iterator[tuple[ControlPlane, ClusterAccess]]:
    """The session's control plane and how to reach it; skipped (failed in CI) if not built.

    Fault tests restart its kube-apiserver through the ControlPlane.
    """
    plane = ControlPlane(_binaries_or_skip(), REPO_ROOT / "crds")
    with plane as access:
        yield plane, access


@pytest.fixture(scope="session")
def control_plane(control_plane_processes: tuple[ControlPlane, ClusterAccess]) -> ClusterAccess:
    """How to reach the session's control plane."""
    return control_plane_processes[1]


@pytest_asyncio.fixture(loop_scope="session")
async def fault_proxy(control_plane: ClusterAccess) -> AsyncIterator[FaultProxy]:
    """A fault-injecting proxy in front of the session's API server, stopped after the test."""
    async with FaultProxy.for_control_plane(control_plane) as proxy:
        yield proxy


@pytest_asyncio.fixture(loop_scope="session")
async def invariants(
    control_plane: ClusterAccess, namespace: str
) -> AsyncIterator[InvariantWatcher]:
    """An independent watcher of the test's namespace, straight to the API server."""
    async with InvariantWatcher(control_plane.kubeconfig, namespace=namespace) as watcher:
        yield watcher


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def api(control_plane: ClusterAccess) -> AsyncIterator[client.ApiClient]:
    """An admin API client (system:masters) for the session's control plane."""
    api_client = await config.new_client_from_config(config_file=str(control_plane.kubeconfig))
    async with api_client:
        yield api_client


@pytest_asyncio.fixture(loop_scope="session")
async def namespace(api: client.ApiClient) -> AsyncIterator[str]:
    """A fresh namespace, ready for pods, deleted after the test."""
    core = client.CoreV1Api(api)
    name = f"kai-test-{uuid.uuid4().hex[:8]}"
    await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    await _wait_for_default_service_account(core, name)
    yield name
    await core.delete_namespace(name)


async def _wait_for_default_service_account(core: client.CoreV1Api, namespace: str) -> None:
    # Pods are admitted only once kube-controller-manager has made this account.
    async with asyncio.timeout(30):
        while True:
            try:
                await core.read_namespaced_service_account("default", namespace)
                return
            except ApiException as err:
                if err.status != 404:
                    raise
            await asyncio.sleep(0.05)


@pytest_asyncio.fixture(loop_scope="session")
async def gpu_nodes(api: client.ApiClient) -> AsyncIterator[NodeFactory]:
    """Creates Ready fake GPU nodes; deletes them after the test (nodes are cluster-wide)."""
    created: list[str] = []

    async def make(node: GpuNode) -> client.V1Node:
        created.append(node.name)
        return await create_gpu_node(api, node)

    yield make
    core = client.CoreV1Api(api)
    for name in created:
        try:
            await core.delete_node(name)
        except ApiException as err:
            if err.status != 404:  # its creation failed
                raise
