"""An HTTP proxy between a client and kube-apiserver that injects faults on command.

The scheduler's failure handling (an unknown bind outcome, throttling, broken
watches, a hung Lease renewal) can only be tested against faults the real API
server does not produce on demand. The proxy listens on plain HTTP on 127.0.0.1,
forwards every request (watch streams line by line) to the real server over TLS
with the admin certificate, and applies the first active rule that matches a
request's method and path. Tests switch rules on and off while the client runs
and wait on each rule's `fired` count rather than on time.

    async with FaultProxy.for_control_plane(access) as proxy:
        rule = proxy.add(Rule("POST", r"/binding$", Fail(503), times=2))
        ...  # point the client at proxy.kubeconfig
        await wait_for(lambda: rule.fired == 2)
        proxy.remove(rule)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import ssl
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import aiohttp
import yaml
from aiohttp import web

from kai.testing.controlplane import ClusterAccess

_FORWARDED_REQUEST_HEADERS = ("Accept", "Content-Type", "User-Agent")
_DROPPED_RESPONSE_HEADERS = {
    "content-length",
    "content-encoding",
    "transfer-encoding",
    "connection",
}
_UPSTREAM_TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=10)
_BAD_GATEWAY = 502


@dataclass(frozen=True)
class Fail:
    """Answer with this status (a 5xx) and a Status body; nothing is forwarded."""

    status: int = 503


@dataclass(frozen=True)
class Throttle:
    """Answer 429 Too Many Requests with Retry-After; nothing is forwarded."""

    retry_after_seconds: int = 1


@dataclass(frozen=True)
class CommitThenDrop:
    """Forward the request (so it takes effect), then close the connection without an answer."""


@dataclass(frozen=True)
class CommitThenHang:
    """Forward the request (so it takes effect), then never answer: the client times out."""


@dataclass(frozen=True)
class Delay:
    """Forward the request (so it takes effect), then send the answer only after `seconds`."""

    seconds: float


@dataclass(frozen=True)
class Drop:
    """Close the connection without forwarding or answering."""


@dataclass(frozen=True)
class Hang:
    """Hold the request without forwarding it until the rule is removed, then drop it."""


@dataclass(frozen=True)
class Gone:
    """Answer a watch with an ERROR event of code 410 (resourceVersion too old), then end it."""


@dataclass(frozen=True)
class MalformedLine:
    """Start a watch with a line that is not JSON, then forward the real stream."""

    line: bytes = b'{"type": "MODIFIED", "object": {"truncated'


@dataclass(frozen=True)
class Observe:
    """Forward untouched: the rule only counts the requests (`fired`)."""


@dataclass(frozen=True)
class Stall:
    """Open the watch but send none of its events until the rule is removed, then all of them.

    A watch that lags: the client's view stays behind the server's.
    """


Action = (
    Fail
    | Throttle
    | CommitThenDrop
    | CommitThenHang
    | Delay
    | Drop
    | Hang
    | Gone
    | MalformedLine
    | Observe
    | Stall
)


@dataclass(eq=False)
class Rule:
    """Requests whose method and path match get `action`, at most `times` times.

    The first `skip` matching requests pass untouched (to fault a gang mid-way);
    `method` "*" matches any method; `watch` restricts the rule to watch requests
    (True) or to the others (False).
    """

    method: str
    path: str
    action: Action
    times: int | None = None
    skip: int = 0
    watch: bool | None = None
    fired: int = 0
    seen: int = 0
    abandoned: int = 0
    """Held requests (Hang, CommitThenHang, Delay) whose client gave up waiting, e.g. timed out."""
    delivered: int = 0
    """Answers sent late (Delay)."""
    _released: asyncio.Event = field(default_factory=asyncio.Event, repr=False)

    def matches(self, method: str, path: str, is_watch: bool) -> bool:
        if self.times is not None and self.fired >= self.times:
            return False
        if self.watch is not None and self.watch != is_watch:
            return False
        return self.method in ("*", method) and re.search(self.path, path) is not None


class FaultProxy:
    """Forwards to one control plane's API server; faults come from the active rules."""

    def __init__(self, access: ClusterAccess, admin_cert: Path, admin_key: Path) -> None:
        self._upstream = access.server.rstrip("/")
        self._tls = ssl.create_default_context(cafile=str(access.ca_cert))
        self._tls.load_cert_chain(str(admin_cert), str(admin_key))
        self._workdir = access.workdir
        self._rules: list[Rule] = []
        self._watches: dict[int, web.Request] = {}
        """Open watch streams by id: the request, whose transport a drop aborts."""
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.actions: Counter[str] = Counter()
        """How often each kind of fault was applied, by action class name."""
        self.watches_dropped = 0
        self.url = ""
        self.kubeconfig = Path()

    @classmethod
    def for_control_plane(cls, access: ClusterAccess) -> FaultProxy:
        """A proxy acting with the admin certificate the control plane wrote to its workdir."""
        pki = access.workdir / "pki"
        return cls(access, pki / "admin.crt", pki / "admin.key")

    async def __aenter__(self) -> FaultProxy:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=self._tls, limit=0),
            timeout=_UPSTREAM_TIMEOUT,
            auto_decompress=True,
        )
        app = web.Application(client_max_size=2**24)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        self.kubeconfig = _write_plain_kubeconfig(
            self._workdir / f"proxy-{port}.kubeconfig", self.url
        )

    async def stop(self) -> None:
        for rule in self._rules:
            rule._released.set()
        self._rules.clear()
        self.drop_watches()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._session is not None:
            await self._session.close()
            self._session = None
        self.kubeconfig.unlink(missing_ok=True)

    def add(self, rule: Rule) -> Rule:
        self._rules.append(rule)
        return rule

    def remove(self, rule: Rule) -> None:
        """Switch the rule off; requests it holds (Hang) are dropped now."""
        with contextlib.suppress(ValueError):
            self._rules.remove(rule)
        rule._released.set()

    def clear(self) -> None:
        for rule in list(self._rules):
            self.remove(rule)

    def drop_watches(self, path: str = "") -> int:
        """Cut the open watch streams whose path matches; returns how many were cut."""
        cut = [key for key, r in self._watches.items() if re.search(path, r.path)]
        for key in cut:
            _abort(self._watches.pop(key))
        self.watches_dropped += len(cut)
        return len(cut)

    def _rule_for(self, request: web.Request, is_watch: bool) -> Rule | None:
        for rule in self._rules:
            if rule.matches(request.method, request.path, is_watch):
                rule.seen += 1
                if rule.seen <= rule.skip:
                    return None
                rule.fired += 1
                self.actions[type(rule.action).__name__] += 1
                return rule
        return None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        is_watch = request.query.get("watch") in ("true", "1")
        rule = self._rule_for(request, is_watch)
        action = rule.action if rule is not None else None
        match action:
            case Fail(status):
                return _status_response(status, "InternalError", "injected by the fault proxy")
            case Throttle(seconds):
                response = _status_response(429, "TooManyRequests", "injected by the fault proxy")
                response.headers["Retry-After"] = str(seconds)
                return response
            case Drop():
                return _abort(request)
            case Hang():
                assert rule is not None
                await _hold(rule)
                return _abort(request)
            case Gone():
                return await self._gone(request)
        body = await request.read()
        try:
            upstream = await self._forward(request, body)
        except aiohttp.ClientError as error:
            return _status_response(_BAD_GATEWAY, "BadGateway", f"upstream: {error}")
        async with upstream:
            match action:
                case CommitThenDrop():
                    await upstream.read()
                    return _abort(request)
                case CommitThenHang():
                    await upstream.read()
                    assert rule is not None
                    await _hold(rule)
                    return _abort(request)
            if is_watch and upstream.status == 200:
                return await self._stream(request, upstream, rule)
            payload = await upstream.read()
            if isinstance(action, Delay):
                assert rule is not None
                try:
                    await asyncio.sleep(action.seconds)
                except asyncio.CancelledError:  # the client gave up first
                    rule.abandoned += 1
                    raise
                rule.delivered += 1
            response = web.Response(status=upstream.status, body=payload)
            _copy_headers(upstream, response)
            return response

    async def _forward(self, request: web.Request, body: bytes) -> aiohttp.ClientResponse:
        assert self._session is not None
        headers = {
            k: request.headers[k] for k in _FORWARDED_REQUEST_HEADERS if k in request.headers
        }
        return await self._session.request(
            request.method,
            self._upstream + request.path_qs,
            data=body or None,
            headers=headers,
            allow_redirects=False,
        )

    async def _stream(
        self, request: web.Request, upstream: aiohttp.ClientResponse, rule: Rule | None
    ) -> web.StreamResponse:
        response = web.StreamResponse(status=upstream.status)
        _copy_headers(upstream, response)
        await response.prepare(request)
        self._watches[id(request)] = request
        try:
            if rule is not None and isinstance(rule.action, MalformedLine):
                await response.write(rule.action.line + b"\n")
            if rule is not None and isinstance(rule.action, Stall):
                await _hold(rule)  # the server's events wait in the upstream connection
            while line := await upstream.content.readline():
                await response.write(line)
        except (aiohttp.ClientError, ConnectionError):
            pass  # either side went away: the watch ends, as a server restart would end it
        finally:
            self._watches.pop(id(request), None)
        return response

    async def _gone(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        await response.prepare(request)
        event = {
            "type": "ERROR",
            "object": {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "message": "too old resource version (injected by the fault proxy)",
                "reason": "Expired",
                "code": 410,
            },
        }
        await response.write(json.dumps(event).encode() + b"\n")
        await response.write_eof()
        return response


async def _hold(rule: Rule) -> None:
    """Wait until the rule is removed; the client hanging up cancels the wait (and is counted)."""
    try:
        await rule._released.wait()
    except asyncio.CancelledError:
        rule.abandoned += 1
        raise


def _status_response(status: int, reason: str, message: str) -> web.Response:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message}
    return web.json_response({**body, "reason": reason, "code": status}, status=status)


def _abort(request: web.Request) -> web.Response:
    """Close the client's connection without an answer (what it sees of a lost reply)."""
    if request.transport is not None:
        request.transport.abort()
    return web.Response(status=_BAD_GATEWAY)  # never reaches the client


def _copy_headers(upstream: aiohttp.ClientResponse, response: web.StreamResponse) -> None:
    for name, value in upstream.headers.items():
        if name.lower() not in _DROPPED_RESPONSE_HEADERS:
            response.headers[name] = value


def _write_plain_kubeconfig(path: Path, server: str) -> Path:
    """A kubeconfig for plain HTTP without credentials: the proxy adds the admin's."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fault-proxy", "cluster": {"server": server}}],
        "users": [{"name": "fault-proxy", "user": {}}],
        "contexts": [
            {"name": "fault-proxy", "context": {"cluster": "fault-proxy", "user": "fault-proxy"}}
        ],
        "current-context": "fault-proxy",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path
