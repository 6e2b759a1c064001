"""A minimal synchronous JSON client for kube-apiserver, used while starting it.

Start-up runs before any event loop exists (in a session fixture or the CLI),
so it polls /readyz and installs CRDs with the standard library rather than
with the asynchronous client the tests use.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kai.testing.certs import KeyPair


@dataclass(frozen=True)
class Response:
    status: int
    body: Any


class RestClient:
    """Sends requests to one API server as one client certificate."""

    def __init__(self, server: str, ca_cert: str, client: KeyPair) -> None:
        self._server = server.rstrip("/")
        self._context = ssl.create_default_context(cafile=ca_cert)
        self._context.load_cert_chain(str(client.cert), str(client.key))

    def request(
        self, method: str, path: str, body: Mapping[str, Any] | None = None, timeout: float = 10
    ) -> Response:
        """Send one request; HTTP errors come back as a Response, not an exception.

        Connection failures raise OSError (urllib.error.URLError is one).
        """
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self._server + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, context=self._context, timeout=timeout) as resp:
                return Response(resp.status, _decode(resp.read()))
        except urllib.error.HTTPError as err:
            return Response(err.code, _decode(err.read()))


def _decode(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")
