"""A thin JSON client for the Kubernetes API: requests and watch streams on raw dicts.

The operator reads thousands of pods and writes one binding per pod; the generated
model classes of kubernetes_asyncio would turn every object into a tree of Python
objects and back. This module keeps kubernetes_asyncio for what it is good at (the
kubeconfig or in-cluster credentials, TLS, token refresh) and moves plain JSON.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes_asyncio import config
from kubernetes_asyncio.client import ApiClient, Configuration

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
_AUTH = ["BearerToken"]


class ApiError(Exception):
    """The API server refused a request; `status` is the HTTP code (0: no answer)."""

    def __init__(self, method: str, path: str, status: int, reason: str, message: str) -> None:
        super().__init__(f"{method} {path}: {status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message

    @property
    def is_transient(self) -> bool:
        """Worth retrying later unchanged: throttling, server errors, no answer."""
        return self.status in (0, 429) or self.status >= 500


class Kube:
    """JSON requests against one API server, through an authenticated ApiClient."""

    def __init__(self, client: ApiClient) -> None:
        self._client = client

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: object = None,
        content_type: str = "application/json",
        timeout: float = 30.0,
    ) -> dict[str, Any]:
        """The decoded answer of a request; raises ApiError on any status outside 2xx."""
        try:
            response = await self._call(method, path, query, body, content_type, timeout)
            async with response:
                payload = await response.read()
                status = response.status
        except (aiohttp.ClientError, TimeoutError) as error:
            raise ApiError(method, path, 0, type(error).__name__, str(error)) from error
        document = _decode(payload)
        if not 200 <= status <= 299:
            raise ApiError(
                method,
                path,
                status,
                str(document.get("reason") or "Error"),
                str(document.get("message") or payload[:200].decode(errors="replace")),
            )
        return document

    async def get(self, path: str, query: Sequence[tuple[str, str]] = ()) -> dict[str, Any]:
        return await self.request("GET", path, query=query)

    async def create(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return await self.request("POST", path, body=body)

    async def merge_patch(self, path: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        return await self.request("PATCH", path, body=patch, content_type=MERGE_PATCH)

    async def json_patch(
        self, path: str, operations: Sequence[Mapping[str, Any]]
    ) -> dict[str, Any]:
        return await self.request("PATCH", path, body=list(operations), content_type=JSON_PATCH)

    async def delete(self, path: str, body: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return await self.request("DELETE", path, body=body)

    async def watch(
        self, path: str, query: Sequence[tuple[str, str]], timeout: float
    ) -> AsyncIterator[dict[str, Any]]:
        """Watch events (`{"type": ..., "object": ...}`) until the server ends the stream.

        Raises ApiError when the watch cannot start; an expired resourceVersion comes
        as an ERROR event with code 410, which the caller handles.
        """
        params = [*query, ("watch", "true")]
        try:
            response = await self._call("GET", path, params, None, "application/json", timeout)
        except (aiohttp.ClientError, TimeoutError) as error:
            raise ApiError("GET", path, 0, type(error).__name__, str(error)) from error
        async with response:
            if response.status != 200:
                document = _decode(await response.read())
                raise ApiError(
                    "GET",
                    path,
                    response.status,
                    str(document.get("reason") or "Error"),
                    str(document.get("message") or ""),
                )
            try:
                async for line in response.content:
                    if line.strip():
                        event: dict[str, Any] = json.loads(line)
                        yield event
            except (aiohttp.ClientError, TimeoutError) as error:
                raise ApiError("GET", path, 0, type(error).__name__, str(error)) from error

    async def _call(
        self,
        method: str,
        path: str,
        query: Sequence[tuple[str, str]],
        body: object,
        content_type: str,
        timeout: float,
    ) -> aiohttp.ClientResponse:
        response: aiohttp.ClientResponse = await self._client.call_api(
            path,
            method,
            query_params=list(query),
            header_params={"Content-Type": content_type, "Accept": "application/json"},
            body=body,
            auth_settings=_AUTH,
            _preload_content=False,
            _request_timeout=timeout,
        )
        return response


def _decode(payload: bytes) -> dict[str, Any]:
    try:
        document = json.loads(payload) if payload else {}
    except ValueError:
        return {}
    return document if isinstance(document, dict) else {}


async def connect(kubeconfig: Path | None, connections: int = 64) -> ApiClient:
    """An API client from a kubeconfig file, or from the pod's ServiceAccount in a cluster.

    Watches hold connections open, so the pool is sized well above the client's
    default (5 per core), or binds would queue behind them.
    """
    configuration = Configuration()
    if kubeconfig is not None:
        await config.load_kube_config(
            config_file=str(kubeconfig), client_configuration=configuration
        )
    else:
        try:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except config.ConfigException:
            await config.load_kube_config(client_configuration=configuration)
    configuration.connection_pool_maxsize = connections
    return ApiClient(configuration)
