"""The thin live adapter of `kai workload`: read Karta definitions and workload objects.

Everything else in the package works on plain dicts; this module is the only one
that talks to an API server, through kubernetes_asyncio and the default kubeconfig.
Objects are read through the dynamic client, so any served type can be described
without knowing its plural. Invalid Karta objects in the cluster are skipped and
reported, as KAI skips them.
"""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio import config
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.dynamic import DynamicClient

from kai.workloads.definition import WorkloadDefinition
from kai.workloads.jqeval import JqEvaluator
from kai.workloads.loader import InvalidDefinitionError, load_definition


async def cluster_definitions(
    jq: JqEvaluator,
) -> tuple[list[WorkloadDefinition], list[str]]:
    """The valid Karta objects in the cluster, and a message for each invalid one."""
    await config.load_kube_config()
    async with ApiClient() as api:
        client = await DynamicClient(api)
        resource = await client.resources.get(api_version="run.ai/v1alpha1", kind="Karta")
        listing = await client.get(resource)
        definitions, problems = [], []
        for item in listing.to_dict().get("items", []):
            try:
                definitions.append(load_definition(item, jq, "cluster"))
            except InvalidDefinitionError as error:
                problems.append(str(error))
        return definitions, problems


async def read_object(api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any]:
    """One object, as the API server returns it."""
    await config.load_kube_config()
    async with ApiClient() as api:
        client = await DynamicClient(api)
        resource = await client.resources.get(api_version=api_version, kind=kind)
        found = await client.get(resource, name=name, namespace=namespace)
        result: dict[str, Any] = found.to_dict()
        return result
