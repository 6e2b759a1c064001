"""The live half of `kai workload`: `get` and `describe TYPE/NAME` against a running cluster.

Requests go through kai's own JSON client (`kai.kube.client`, the operator's), so a
listing of thousands of workloads stays plain dicts and `--kubeconfig` means what it
means for `kai run`. Owner chains are walked by the operator's `OwnerReader`, the
reader the pod grouper uses, so describe attributes a pod to a workload exactly when
the grouper would see that workload as the pod's owner.

What a type word means is settled here: the definitions' own spellings first (kind,
plural, `kind.version.group`, the definition's name), then API discovery for the
names only the server knows (short names such as `deploy`); and when one kind is
defined at several versions, the version the server serves. Failures a script must
tell apart carry upstream kli's exit codes: 3 the workload does not exist (nor its
type on this server), 4 no definition covers the type (`NoDefinitionError`), 2 a type
word that names kinds of several groups.

Imported only by the handlers of `kai/cli/workload.py`: it loads the Kubernetes client.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from kubernetes_asyncio.config import ConfigException

from kai.api.errors import ManifestError
from kai.cli.describe import NoDefinitionError, workload_view
from kai.cli.output import logs_to_stderr
from kai.cli.workload import EXIT_NOT_FOUND, EXIT_USAGE, WorkloadCliError, merged_registry
from kai.kube.client import ApiError, Kube, connect
from kai.kube.listing import list_all
from kai.kube.owners import OwnerChainError, OwnerReader
from kai.workloads.catalog import load_catalog
from kai.workloads.definition import GVK, WorkloadDefinition
from kai.workloads.jqeval import JqError, JqEvaluator
from kai.workloads.loader import InvalidDefinitionError, load_definition
from kai.workloads.objects import gvk_of, metadata, name_of
from kai.workloads.registry import DefinitionRegistry

KARTA = GVK("run.ai", "v1alpha1", "Karta")
POD = GVK("", "v1", "Pod")
OWNER_WALKS_AT_ONCE = 8
"""Owner reads in flight for `--all-types`; a namespace of pods under one uncovered owner
kind (ReplicaSets) costs one read per distinct owner, and a serial walk scales badly."""


@dataclass(frozen=True)
class Resource:
    """A kind as the API server serves it: where its objects are, and the names it answers to."""

    gvk: GVK
    plural: str
    namespaced: bool
    names: frozenset[str] = frozenset()
    """Plural, singular and short names, lower-case."""

    def path(self, namespace: str | None, name: str | None = None) -> str:
        """The collection (or, with `name`, the object) in `namespace`; None: every namespace."""
        scope = f"/namespaces/{namespace}" if self.namespaced and namespace else ""
        return f"{_base(self.gvk.api_version)}{scope}/{self.plural}" + (f"/{name}" if name else "")


def _base(api_version: str) -> str:
    """Where a group version is served: the core group under /api, every other under /apis."""
    return "/api/v1" if api_version == "v1" else f"/apis/{api_version}"


PODS = Resource(POD, "pods", namespaced=True, names=frozenset({"pods", "pod", "po"}))


class Cluster:
    """One API server as a `kai workload` command reads it; discovery is read once per command."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.owners = OwnerReader(kube)
        self._groups: dict[str, list[str]] | None = None
        self._resources: dict[str, list[Resource]] = {}

    async def served_versions(self, group: str) -> list[str]:
        """The versions the server serves of `group`, its preferred version first; [] if none."""
        if group == "":
            return ["v1"]
        if self._groups is None:
            listing = await self.kube.get("/apis")
            self._groups = {}
            for entry in listing.get("groups") or []:
                versions = [str(v.get("version")) for v in entry.get("versions") or []]
                preferred = str((entry.get("preferredVersion") or {}).get("version") or "")
                ordered = [v for v in versions if v == preferred] + [
                    v for v in versions if v != preferred
                ]
                self._groups[str(entry.get("name"))] = ordered
        return self._groups.get(group, [])

    async def resource(self, gvk: GVK) -> Resource | None:
        """Where objects of `gvk` are served; None when the server does not serve that kind."""
        return next((r for r in await self.resources(gvk.group, gvk.version) if r.gvk == gvk), None)

    async def resources(self, group: str, version: str) -> list[Resource]:
        """The kinds served at one group version (no sub-resources); [] when it is not served."""
        api_version = GVK(group, version, "").api_version
        if api_version not in self._resources:
            found: list[Resource] = []
            if version in await self.served_versions(group):
                listing = await self.kube.get(_base(api_version))
                for item in listing.get("resources") or []:
                    plural = str(item.get("name") or "")
                    if "/" in plural:
                        continue
                    names = {
                        plural,
                        str(item.get("singularName") or ""),
                        *item.get("shortNames", []),
                    }
                    found.append(
                        Resource(
                            GVK(group, version, str(item.get("kind"))),
                            plural,
                            bool(item.get("namespaced")),
                            frozenset(str(n).lower() for n in names if n),
                        )
                    )
            self._resources[api_version] = found
        return self._resources[api_version]

    async def read(
        self, resource: Resource, namespace: str | None, name: str
    ) -> dict[str, Any] | None:
        """One object, or None when it does not exist."""
        try:
            found = await self.kube.get(resource.path(namespace, name))
        except ApiError as error:
            if error.status == 404:
                return None
            raise
        return {"apiVersion": resource.gvk.api_version, "kind": resource.gvk.kind, **found}

    async def list(
        self, resource: Resource, namespace: str | None, selector: str = ""
    ) -> list[dict[str, Any]]:
        """Every object of a kind in `namespace` (None: every namespace), read in pages."""
        query = [("labelSelector", selector)] if selector else []
        return (await list_all(self.kube, resource.path(namespace), query))[0]


@contextlib.asynccontextmanager
async def connected(kubeconfig: Path | None) -> AsyncIterator[Cluster]:
    """The cluster `kubeconfig` names (default: in-cluster, then $KUBECONFIG or ~/.kube/config),
    with library logs kept out of stdout (`logs_to_stderr`)."""
    logs_to_stderr()
    client = await connect(kubeconfig, connections=OWNER_WALKS_AT_ONCE)
    async with client:
        yield Cluster(Kube(client))


async def live_registry(
    cluster: Cluster, files: Sequence[WorkloadDefinition], jq: JqEvaluator
) -> tuple[DefinitionRegistry, list[str]]:
    """Catalog, then the cluster's Karta objects, then `--definition` files, each overriding the
    one before for the same type; and a warning for every cluster definition left out."""
    warnings: list[str] = []
    found: list[WorkloadDefinition] = []
    try:
        found, warnings = await cluster_definitions(cluster, jq)
    except ApiError as error:
        warnings.append(f"cannot read Karta definitions ({error}); using the built-in catalog")
    return merged_registry(load_catalog(jq), found, files, jq, warnings), warnings


async def definitions_registry(
    kubeconfig: Path | None, files: Sequence[WorkloadDefinition], jq: JqEvaluator
) -> tuple[DefinitionRegistry, list[str]]:
    """`live_registry` when a cluster can be read, else the catalog and files with a note saying
    so: listing definitions needs no cluster, and a missing one is not worth failing for."""
    try:
        async with connected(kubeconfig) as cluster:
            return await live_registry(cluster, files, jq)
    except (ConfigException, OSError, ApiError) as error:
        notes = [f"using the built-in catalog only ({type(error).__name__}: {error})"]
        return merged_registry(load_catalog(jq), [], files, jq, []), notes


async def cluster_definitions(
    cluster: Cluster, jq: JqEvaluator
) -> tuple[list[WorkloadDefinition], list[str]]:
    """The valid Karta objects of the cluster, and why each invalid one is skipped (KAI skips them
    too). A cluster without the Karta CRD has none."""
    resource = await cluster.resource(KARTA)
    if resource is None:
        return [], []
    definitions, warnings = [], []
    for item in await cluster.list(resource, None):
        try:
            definitions.append(load_definition(item, jq, "cluster"))
        except InvalidDefinitionError as error:
            warnings.append(f"skipped {error}")
    return definitions, warnings


async def resolve_definition(
    word: str, registry: DefinitionRegistry, cluster: Cluster
) -> WorkloadDefinition:
    """The definition a type word means (NoDefinitionError when none; exit 2 when it names
    kinds of several groups). One kind at several versions resolves to the version the server
    prefers among those defined, else one it serves, else the most stable defined."""
    matches = registry.types_matching(word) or await _discovered(word, registry, cluster)
    if not matches:
        raise NoDefinitionError(None, None, word)
    kinds = sorted({(d.gvk.group, d.gvk.kind) for d in matches})
    if len(kinds) > 1:
        spelled = ", ".join(
            sorted(f"{d.gvk.kind.lower()}.{d.gvk.version}.{d.gvk.group}" for d in matches)
        )
        raise WorkloadCliError(
            EXIT_USAGE, f"{word!r} names more than one kind; use one of: {spelled}"
        )
    by_version = {d.gvk.version: d for d in matches}
    for version in await cluster.served_versions(kinds[0][0]):
        if version in by_version:
            return by_version[version]
    return by_version[sorted(by_version, key=version_priority)[0]]


async def _discovered(
    word: str, registry: DefinitionRegistry, cluster: Cluster
) -> list[WorkloadDefinition]:
    """Definitions whose kind the server knows by `word` (a short name or singular), searched
    only in the group versions some definition covers: only those can resolve to one."""
    wanted = word.lower()
    versions = sorted({(d.gvk.group, d.gvk.version) for d in registry.definitions()})
    served = await asyncio.gather(*(cluster.resources(g, v) for g, v in versions))
    named = [r.gvk for listing in served for r in listing if wanted in r.names]
    return [d for gvk in named if (d := registry.get(gvk)) is not None]


def version_priority(version: str) -> tuple[int, int, int, str]:
    """Sort key putting the most stable version first, as Kubernetes orders them:
    v2 before v1, GA before beta before alpha, v1beta2 before v1beta1, then the rest by name."""
    found = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if found is None:
        return (3, 0, 0, version)
    major, stage, minor = found.groups()
    rank = {None: 0, "beta": 1, "alpha": 2}[stage]
    return (rank, -int(major), -int(minor or 0), version)


@dataclass
class Listing:
    """The rows `kai workload get` prints, and what it searched."""

    views: list[dict[str, Any]]
    by_name: bool
    namespace: str | None  # None: every namespace (or a cluster-scoped type)
    types: list[str] | None = None  # the TYPE column, for --all-types
    warnings: list[str] = field(default_factory=list)


async def get_workloads(args: Any) -> Listing:
    """`kai workload get`: one row per workload, its phase computed from the object alone."""
    jq = JqEvaluator()
    async with connected(args.kubeconfig) as cluster:
        registry, warnings = await live_registry(cluster, args.definition_files, jq)
        namespace = None if args.all_namespaces else args.namespace
        if args.all_types:
            listing = await _all_types(cluster, registry, namespace, args)
        else:
            listing = await _one_type(cluster, registry, namespace, args)
        listing.warnings[:0] = warnings
    listing.views, listing.types = _newest_first(listing.views, listing.types)
    return listing


async def _one_type(
    cluster: Cluster, registry: DefinitionRegistry, namespace: str | None, args: Any
) -> Listing:
    definition = await resolve_definition(args.type_word, registry, cluster)
    resource = await cluster.resource(definition.gvk)
    if resource is None:
        message = f"{definition.gvk.kind} is not installed in this cluster"
        if args.name:
            raise WorkloadCliError(EXIT_NOT_FOUND, message)
        return Listing([], False, namespace, warnings=[message])
    searched = namespace if resource.namespaced else None
    if args.name:
        found = await cluster.read(resource, searched, args.name)
        if found is None:
            raise WorkloadCliError(EXIT_NOT_FOUND, _missing(resource, args.name, searched))
        objects = [found]
    else:
        objects = await cluster.list(resource, searched, args.selector)
    listing = Listing([], bool(args.name), searched)
    for obj in objects:
        view = _view(obj, registry, definition, listing.warnings)
        if view is not None and _passes(view, args.phases):
            listing.views.append(view)
    return listing


async def _all_types(
    cluster: Cluster, registry: DefinitionRegistry, namespace: str | None, args: Any
) -> Listing:
    """Every covered kind at the most stable version served, keeping only the workloads no
    covered object controls (a Job of a CronJob, the pods of a Deployment are not rows)."""
    versions: dict[tuple[str, str], list[str]] = {}
    for definition in registry.definitions():
        versions.setdefault((definition.gvk.group, definition.gvk.kind), []).append(
            definition.gvk.version
        )
    listing = Listing([], False, namespace, types=[])
    candidates: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for (group, kind), defined in versions.items():
        resource = await _most_stable(cluster, group, kind, defined)
        if resource is None:
            continue  # most covered kinds are absent from any one cluster: not worth a warning
        covering = registry.get(resource.gvk)
        assert covering is not None  # _most_stable tries only defined versions
        try:
            objects = await cluster.list(
                resource, namespace if resource.namespaced else None, args.selector
            )
        except ApiError as error:
            if error.status != 403:
                raise
            listing.warnings.append(f"not allowed to list {kind}, so the result leaves it out")
            continue
        for obj in objects:
            view = _view(obj, registry, covering, listing.warnings)
            if view is not None and _passes(view, args.phases):
                candidates.append((obj, view))
    covered = set(versions)
    gate = asyncio.Semaphore(OWNER_WALKS_AT_ONCE)
    nested = await asyncio.gather(
        *(
            _controlled_by_covered(cluster, obj, covered, gate, listing.warnings)
            for obj, _ in candidates
        )
    )
    groups_of_kind: dict[str, set[str]] = {}
    for group, kind in covered:
        groups_of_kind.setdefault(kind, set()).add(group)
    for (obj, view), inside in zip(candidates, nested, strict=True):
        if inside:
            continue
        listing.views.append(view)
        gvk = gvk_of(obj)
        shared = len(groups_of_kind.get(gvk.kind, ())) > 1 and gvk.group
        assert listing.types is not None
        listing.types.append(f"{gvk.kind}.{gvk.group}" if shared else gvk.kind)
    return listing


async def _most_stable(
    cluster: Cluster, group: str, kind: str, versions: Sequence[str]
) -> Resource | None:
    for version in sorted(versions, key=version_priority):
        resource = await cluster.resource(GVK(group, version, kind))
        if resource is not None:
            return resource
    return None


async def _controlled_by_covered(
    cluster: Cluster,
    obj: Mapping[str, Any],
    covered: set[tuple[str, str]],
    gate: asyncio.Semaphore,
    warnings: list[str],
) -> bool:
    """Whether a covered kind is on the object's controller chain. The chain is checked by the
    owner references themselves, so an owner that is gone still counts by its reference."""
    async with gate:
        try:
            chain = await cluster.owners.chain(obj)
        except (ApiError, OwnerChainError) as error:
            warnings.append(
                f"listing {obj.get('kind')}/{name_of(obj)}, though it may belong to another "
                f"workload: {error}"
            )
            return False
    for link in (obj, *chain):
        for reference in metadata(link).get("ownerReferences") or []:
            if isinstance(reference, Mapping) and reference.get("controller"):
                owner = GVK.of(str(reference.get("apiVersion") or ""), str(reference.get("kind")))
                if (owner.group, owner.kind) in covered:
                    return True
    return False


@dataclass
class LiveWorkload:
    """A workload read for `describe`, with the pods it owns."""

    obj: dict[str, Any]
    registry: DefinitionRegistry
    pods: list[dict[str, Any]]
    warnings: list[str]


async def read_workload(args: Any) -> LiveWorkload:
    """`kai workload describe TYPE/NAME`: the object, and every pod whose owner chain reaches it
    (the pods of its namespace; of every namespace for a cluster-scoped type)."""
    jq = JqEvaluator()
    async with connected(args.kubeconfig) as cluster:
        registry, warnings = await live_registry(cluster, args.definition_files, jq)
        definition = await resolve_definition(args.type_word, registry, cluster)
        resource = await cluster.resource(definition.gvk)
        if resource is None:
            raise WorkloadCliError(
                EXIT_NOT_FOUND, f"{definition.gvk.kind} is not installed in this cluster"
            )
        namespace = args.namespace if resource.namespaced else None
        obj = await cluster.read(resource, namespace, args.name)
        if obj is None:
            raise WorkloadCliError(EXIT_NOT_FOUND, _missing(resource, args.name, namespace))
        pods = await cluster.list(PODS, namespace)
        uid = str(metadata(obj).get("uid"))
        owned = [pod for pod in pods if await _owned(cluster, pod, uid)]
    return LiveWorkload(obj, registry, owned, warnings)


async def _owned(cluster: Cluster, pod: Mapping[str, Any], uid: str) -> bool:
    """Whether the pod is the workload, or its owner chain reaches it (an unreadable chain does
    not: its pod is someone else's as far as anyone can tell)."""
    if metadata(pod).get("uid") == uid or any(
        isinstance(ref, Mapping) and ref.get("uid") == uid
        for ref in metadata(pod).get("ownerReferences") or []
    ):
        return True
    if not metadata(pod).get("ownerReferences"):
        return False
    try:
        chain = await cluster.owners.chain(pod)
    except (ApiError, OwnerChainError):
        return False
    return any(metadata(owner).get("uid") == uid for owner in chain)


def _view(
    obj: dict[str, Any],
    registry: DefinitionRegistry,
    definition: WorkloadDefinition,
    warnings: list[str],
) -> dict[str, Any] | None:
    try:
        return workload_view(obj, registry.find(gvk_of(obj)) or definition, registry.jq)
    except (ManifestError, JqError) as error:
        warnings.append(f"could not resolve {obj.get('kind')}/{name_of(obj)}: {error}")
        return None


def _passes(view: Mapping[str, Any], phases: Sequence[str]) -> bool:
    return not phases or any(phase in view["phases"] for phase in phases)


def _newest_first(
    views: list[dict[str, Any]], types: list[str] | None
) -> tuple[list[dict[str, Any]], list[str] | None]:
    """Rows newest first, so a workload just submitted is at the top; then by kind and name."""

    def key(index: int) -> tuple[float, str, str]:
        view = views[index]
        return (-_timestamp(view.get("createdAt")), str(view["kind"]), str(view["name"]))

    order = sorted(range(len(views)), key=key)
    return [views[i] for i in order], None if types is None else [types[i] for i in order]


def _timestamp(value: Any) -> float:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _missing(resource: Resource, name: str, namespace: str | None) -> str:
    where = f" in namespace {namespace}" if namespace else ""
    return f'{resource.gvk.kind} "{name}" not found{where}'
