"""Reading a pod's owner chain from the API server, as KAI's pod grouper walks it (§14.2).

Owners are read uncached, each checked against the uid its child names. A read
the scheduler may not do (403) or an owner that is gone (404) ends the chain at
the last owner that could be read, or at the pod itself; more than one controller
owner at any step is an error. The plural name of an owner's kind comes from API
discovery, remembered for the life of the process.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from kai.kube.client import ApiError, Kube

log = structlog.get_logger(__name__)


class OwnerChainError(ValueError):
    """An owner chain that cannot be followed: more than one controller owner at a step."""


_STOPS_THE_CHAIN = (403, 404)


class OwnerReader:
    """Resolves owner chains; owners read in one cycle are shared by that cycle's pods."""

    def __init__(self, kube: Kube) -> None:
        self._kube = kube
        self._plurals: dict[str, dict[str, tuple[str, bool]]] = {}
        self._owners: dict[tuple[str, str, str, str], Mapping[str, Any] | None] = {}

    def start_cycle(self) -> None:
        """Owners change (a Job's annotations, a JobSet's replicas): read them afresh each cycle."""
        self._owners = {}

    async def chain(self, pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        """The pod's owners, direct owner first, top owner last."""
        chain: list[Mapping[str, Any]] = []
        current: Mapping[str, Any] = pod
        namespace = str(_metadata(pod).get("namespace") or "default")
        seen = {str(_metadata(pod).get("uid") or "")}
        while True:
            references = _controller_references(current)
            if len(references) > 1:
                raise OwnerChainError(
                    f"{current.get('kind') or 'Pod'} {_metadata(current).get('name') or '?'} has "
                    f"{len(references)} owners; one is allowed"
                )
            if not references:
                return chain
            reference = references[0]
            uid = str(reference.get("uid") or "")
            if uid in seen:
                return chain
            owner = await self._read(reference, namespace)
            if owner is None or str(_metadata(owner).get("uid") or "") != uid:
                return chain
            seen.add(uid)
            chain.append(owner)
            current = owner

    async def _read(self, reference: Mapping[str, Any], namespace: str) -> Mapping[str, Any] | None:
        api_version = str(reference.get("apiVersion") or "")
        kind = str(reference.get("kind") or "")
        name = str(reference.get("name") or "")
        key = (api_version, kind, namespace, name)
        if key in self._owners:
            return self._owners[key]
        owner: Mapping[str, Any] | None = None
        try:
            path = await self._path(api_version, kind, namespace, name)
            if path is not None:
                found = await self._kube.get(path)
                owner = {**found, "apiVersion": api_version, "kind": kind}
        except ApiError as error:
            if error.status not in _STOPS_THE_CHAIN:
                raise
            log.info(
                "owner not readable; chain ends below it",
                owner=f"{kind} {name}",
                status=error.status,
            )
        self._owners[key] = owner
        return owner

    async def _path(self, api_version: str, kind: str, namespace: str, name: str) -> str | None:
        resources = self._plurals.get(api_version)
        if resources is None:
            base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            listing = await self._kube.get(base)
            resources = {
                str(item["kind"]): (str(item["name"]), bool(item.get("namespaced")))
                for item in listing.get("resources") or []
                if "/" not in str(item.get("name"))
            }
            self._plurals[api_version] = resources
        found = resources.get(kind)
        if found is None:
            return None
        plural, namespaced = found
        base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        scope = f"/namespaces/{namespace}" if namespaced else ""
        return f"{base}{scope}/{plural}/{name}"


def _controller_references(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    references = [
        ref for ref in _metadata(obj).get("ownerReferences") or [] if isinstance(ref, Mapping)
    ]
    controllers = [ref for ref in references if ref.get("controller")]
    return controllers or references


def _metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    found = obj.get("metadata")
    return found if isinstance(found, Mapping) else {}
