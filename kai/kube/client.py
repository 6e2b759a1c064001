"""A thin JSON client for the Kubernetes API: requests and watch streams on raw dicts.

The operator reads thousands of pods and writes one binding per pod; the generated
model classes of kubernetes_asyncio would turn every object into a tree of Python
objects and back. This module keeps kubernetes_asyncio for what it is good at (the
kubeconfig or in-cluster credentials, TLS, token refresh) and moves plain JSON.

Requests go straight to aiohttp over the ApiClient's own connection pool (so its
TLS settings), not through `ApiClient.call_api`: that path walks every body to
sanitise it, and its session trusts the environment, which makes aiohttp look for
a `.netrc` and for proxy variables on a worker thread for every request. Here the
proxy is read from the configuration or the environment once, and a `.netrc` is
not consulted (client-go does not either). Every request, watches included, goes
through one RetryPolicy (kai/kube/retry.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import urllib.request
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import aiohttp
import structlog
from aiohttp.http_exceptions import LineTooLong
from kubernetes_asyncio import config
from kubernetes_asyncio.client import ApiClient, Configuration

from kai.kube.retry import RetryPolicy

log = structlog.get_logger(__name__)

T = TypeVar("T")
DEFAULT_RETRY = RetryPolicy()

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
USER_AGENT = "kai-scheduler"
_AUTH = ["BearerToken"]
_READ_BUFFER = 2**21
"""Watch events of large objects exceed aiohttp's default line buffer (etcd allows 1.5 MiB)."""
_REPEATABLE_METHODS = ("GET", "PUT", "DELETE")
_REPEATABLE_PATCHES = (MERGE_PATCH, "application/strategic-merge-patch+json")


class ApiError(Exception):
    """The API server refused a request; `status` is the HTTP code (0: no answer).

    `sent` is False when the request never reached the server (the connection could
    not be made), so a write that failed that way certainly did not happen.
    `retry_after` is the server's Retry-After, in seconds, when it gave one.
    """

    def __init__(
        self,
        method: str,
        path: str,
        status: int,
        reason: str,
        message: str,
        *,
        sent: bool = True,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{method} {path}: {status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.sent = sent
        self.retry_after = retry_after

    @property
    def is_transient(self) -> bool:
        """Worth retrying later unchanged: throttling, server errors, no answer."""
        return self.status in (0, 429) or self.status >= 500

    @property
    def outcome_unknown(self) -> bool:
        """A write that may have been carried out: it was sent, and no answer or a 5xx came back."""
        return self.sent and (self.status == 0 or self.status >= 500)


class UnreadableEventError(Exception):
    """A watch stream sent a line that is no event: the event is lost, the stream is unusable."""


class Kube:
    """JSON requests against one API server, with an ApiClient's credentials and connections."""

    def __init__(self, client: ApiClient, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        self._client = client
        self._retry = retry
        configuration = client.configuration
        self._host = str(configuration.host).rstrip("/")
        self._server_hostname: str | None = configuration.tls_server_name or None
        self._proxy: str | None = configuration.proxy or _environment_proxy(self._host)
        self._proxy_headers: Mapping[str, str] | None = configuration.proxy_headers
        self._session: aiohttp.ClientSession | None = None
        self.failed_requests = 0
        """Requests (reads and writes) given up on, watches aside: a caller that waits for
        the cluster to change before trying again learns here that something it did failed."""

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
        return _decode(await self._send(method, path, query, body, content_type, timeout))

    async def write(
        self,
        method: str,
        path: str,
        body: object = None,
        content_type: str = "application/json",
        timeout: float = 30.0,
        proceed: Callable[[], bool] | None = None,
    ) -> None:
        """A request whose answer is not needed: it is read but not decoded unless it is an error.

        The server answers a write with the whole object, and decoding thousands of
        them was a tenth of the operator's time on the event loop. `proceed`, when
        given, is asked before every retry: a writer that may no longer write (a
        deposed leader) stops with the last error instead of trying again.
        """
        await self._send(method, path, (), body, content_type, timeout, proceed)

    async def get(self, path: str, query: Sequence[tuple[str, str]] = ()) -> dict[str, Any]:
        return await self.request("GET", path, query=query)

    async def create(
        self, path: str, body: Mapping[str, Any], proceed: Callable[[], bool] | None = None
    ) -> None:
        await self.write("POST", path, body, proceed=proceed)

    async def merge_patch(self, path: str, patch: Mapping[str, Any]) -> None:
        await self.write("PATCH", path, patch, MERGE_PATCH)

    async def json_patch(self, path: str, operations: Sequence[Mapping[str, Any]]) -> None:
        await self.write("PATCH", path, list(operations), JSON_PATCH)

    async def delete(self, path: str, body: Mapping[str, Any] | None = None) -> None:
        await self.write("DELETE", path, body)

    async def _send(
        self,
        method: str,
        path: str,
        query: Sequence[tuple[str, str]],
        body: object,
        content_type: str,
        timeout: float,
        proceed: Callable[[], bool] | None = None,
    ) -> bytes:
        """The body of a 2xx answer, retried as the policy allows; ApiError when it gives up."""

        async def attempt() -> bytes:
            with _as_api_error(method, path):
                response = await self._call(method, path, query, body, content_type, timeout)
                async with response:
                    payload = await response.read()
            if not 200 <= response.status <= 299:
                raise _refused(method, path, response, payload)
            return payload

        idempotent = _safe_to_repeat(method, content_type)
        try:
            return await self._retrying(method, path, idempotent, attempt, proceed)
        except BaseException:
            self.failed_requests += 1
            raise

    async def watch(
        self, path: str, query: Sequence[tuple[str, str]], timeout: float
    ) -> AsyncGenerator[dict[str, Any], None]:
        """Watch events (`{"type": ..., "object": ...}`) until the server ends the stream.

        Raises ApiError when the watch cannot start (after the policy's retries) or
        the connection fails; an expired resourceVersion comes as an ERROR event
        with code 410, which the caller handles. A line that is not an event (not
        JSON, or over aiohttp's line limit) raises UnreadableEventError: the
        event is lost, so only a relist can catch up.
        """
        params = [*query, ("watch", "true")]

        async def attempt() -> aiohttp.ClientResponse:
            with _as_api_error("GET", path):
                response = await self._call("GET", path, params, None, "application/json", timeout)
                if response.status == 200:
                    return response
                async with response:
                    payload = await response.read()
            raise _refused("GET", path, response, payload)

        response = await self._retrying("GET", path, True, attempt)
        async with response:
            with _as_api_error("GET", path):
                try:
                    async for line in response.content:
                        if line.strip():
                            yield _event(path, line)
                except LineTooLong as error:  # aiohttp allows lines of twice the buffer
                    raise UnreadableEventError(
                        f"watch {path}: an event longer than {2 * _READ_BUFFER} bytes"
                    ) from error

    async def _retrying(
        self,
        method: str,
        path: str,
        idempotent: bool,
        attempt: Callable[[], Awaitable[T]],
        proceed: Callable[[], bool] | None = None,
    ) -> T:
        """`attempt()`, tried again while the retry policy allows, its deadline is not reached
        and `proceed()` (if given) still holds."""
        loop = asyncio.get_running_loop()
        give_up_at = loop.time() + self._retry.deadline_seconds
        retries = 0
        while True:
            try:
                return await attempt()
            except ApiError as error:
                delay = self._retry.delay(retries, error)
                if not self._retry.should_retry(error, idempotent) or (
                    loop.time() + delay > give_up_at
                ):
                    raise
                log.debug(
                    "request failed; retrying",
                    method=method,
                    path=path,
                    error=str(error),
                    retry_seconds=round(delay, 2),
                )
                await asyncio.sleep(delay)
                if proceed is not None and not proceed():
                    raise
                retries += 1

    async def _call(
        self,
        method: str,
        path: str,
        query: Sequence[tuple[str, str]],
        body: object,
        content_type: str,
        timeout: float,
    ) -> aiohttp.ClientResponse:
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        data = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = json.dumps(body, separators=(",", ":")).encode()
        # Refreshes an expiring token (exec plugins, projected ServiceAccount tokens).
        await self._client.update_params_for_auth(headers, [], _AUTH)
        return await self._connections().request(
            method,
            self._host + path,
            params=list(query) or None,
            data=data,
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=timeout),
            proxy=self._proxy,
            proxy_headers=self._proxy_headers,
            server_hostname=self._server_hostname,
        )

    def _connections(self) -> aiohttp.ClientSession:
        """A session over the ApiClient's connection pool; closed when the ApiClient closes it.

        Made on first use, on the running event loop. It does not own the pool, and
        aiohttp counts a session whose pool is closed as closed.
        """
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=self._client.rest_client.pool_manager.connector,
                connector_owner=False,
                trust_env=False,
                read_bufsize=_READ_BUFFER,
            )
        return self._session


def _environment_proxy(host: str) -> str | None:
    """The proxy the environment names for this server (HTTPS_PROXY, NO_PROXY), if any."""
    parts = urlsplit(host)
    if urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    return urllib.request.getproxies().get(parts.scheme or "https")


def _safe_to_repeat(method: str, content_type: str) -> bool:
    """Whether applying the request twice leaves the same result as once.

    A PUT carries the resourceVersion it read, so a repeat of one that did commit
    fails with 409 rather than writing twice; a repeated DELETE finds nothing (404);
    a merge patch sets the same fields again. A POST creates (or binds) again, and
    a JSON patch may append to a list again.
    """
    if method == "PATCH":
        return content_type in _REPEATABLE_PATCHES
    return method in _REPEATABLE_METHODS


@contextlib.contextmanager
def _as_api_error(method: str, path: str) -> Iterator[None]:
    """No answer, as an ApiError with status 0; `sent` is False if no connection was made."""
    try:
        yield
    except aiohttp.ClientConnectorError as error:
        raise ApiError(method, path, 0, type(error).__name__, str(error), sent=False) from error
    except (aiohttp.ClientError, TimeoutError) as error:
        raise ApiError(method, path, 0, type(error).__name__, str(error)) from error


def _refused(method: str, path: str, response: aiohttp.ClientResponse, payload: bytes) -> ApiError:
    """The error for an answer outside 2xx, with the server's Status reason and message."""
    document = _decode(payload)
    return ApiError(
        method,
        path,
        response.status,
        str(document.get("reason") or "Error"),
        str(document.get("message") or payload[:200].decode(errors="replace")),
        retry_after=_seconds(response.headers.get("Retry-After")),
    )


def _event(path: str, line: bytes) -> dict[str, Any]:
    try:
        event = json.loads(line)
    except ValueError as error:
        raise UnreadableEventError(f"watch {path}: undecodable line: {error}") from error
    if not isinstance(event, dict):
        raise UnreadableEventError(f"watch {path}: a line that is not an object")
    return event


def _seconds(retry_after: str | None) -> float | None:
    """Retry-After in seconds; the API server sends whole seconds (an HTTP date is not used)."""
    try:
        return max(0.0, float(retry_after)) if retry_after else None
    except ValueError:
        return None


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
    configuration = await load_configuration(kubeconfig)
    configuration.connection_pool_maxsize = connections
    return ApiClient(configuration)


async def load_configuration(kubeconfig: Path | None) -> Configuration:
    """The credentials of a kubeconfig file, or of the pod's ServiceAccount, then the default file."""
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
    return configuration


_POD_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def context_namespace(kubeconfig: Path | None) -> str:
    """The namespace kubectl would default to, found where `load_configuration` finds the
    credentials: with no kubeconfig named, the pod's own in a cluster; else the kubeconfig's
    current context's; else `default`."""
    if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        with contextlib.suppress(OSError):
            return _POD_NAMESPACE_FILE.read_text().strip() or "default"
    try:
        _, current = config.list_kube_config_contexts(str(kubeconfig) if kubeconfig else None)
    except (config.ConfigException, OSError):
        return "default"
    return str(((current or {}).get("context") or {}).get("namespace") or "default")
