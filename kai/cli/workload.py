"""`kai workload`: list and describe workloads through their definitions, list and check those.

    kai workload get (TYPE[/NAME] [NAME] | --all-types) [--phase P]... [-l SEL] [-n NS | -A]
    kai workload describe (TYPE/NAME | TYPE NAME | -f FILE|-) [-n NS] [--pod-limit N]
    kai workload definitions [NAME | --group G [--kind K [--version V]]] [--component-limit N]
    kai workload validate FILE|-

What upstream's `kli` does (workload-definitions §11), within contracts/workload.md:
`describe -f` and `validate` need no cluster; the live commands read the cluster's
Karta objects, which override catalog definitions of the same type, and every
command but validate takes `--definition FILE` (repeatable), which overrides both.
`get`, live `describe` and `definitions` also take `--kubeconfig`.

Exit codes: 0 success; 1 a failure about the input (an invalid definition, a manifest
of a type no definition covers, as the contract fixes) or the cluster (unreachable,
forbidden); 2 an input that cannot be read, or arguments that do not go together;
3 no such workload (kli's); 4 no definition covers the TYPE named (kli's).

Only arguments and the no-cluster paths live here, with light imports: the live
paths (`kai.cli.workload_live`) load the Kubernetes client when they run.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Coroutine, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml

from kai.api.errors import ManifestError
from kai.cli.describe import NoDefinitionError, describe_workload
from kai.cli.output import emit
from kai.cli.workload_tables import (
    definitions_table,
    describe_table,
    workloads_table,
)
from kai.grouping import GroupingError
from kai.workloads.catalog import load_catalog
from kai.workloads.definition import STATUS_ORDER, UNDEFINED_STATUS, WorkloadDefinition
from kai.workloads.jqeval import JqError, JqEvaluator
from kai.workloads.loader import InvalidDefinitionError, definition_problems, load_definition
from kai.workloads.registry import DefinitionRegistry, DuplicateDefinitionError

OUTPUTS = ("table", "json", "yaml")
EXIT_OK, EXIT_FAILED, EXIT_UNREADABLE, EXIT_NOT_FOUND, EXIT_NO_DEFINITION = 0, 1, 2, 3, 4
EXIT_USAGE = EXIT_UNREADABLE
PHASES = (*STATUS_ORDER, UNDEFINED_STATUS)
T = TypeVar("T")


class WorkloadCliError(Exception):
    """A failure with the exit code a script tells it apart by."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "workload", help="list and describe workloads by their definitions"
    )
    verbs = parser.add_subparsers(dest="workload_command", required=True)

    get = verbs.add_parser("get", help="workloads of a type (or of every type) and their phase")
    _target(get)
    get.add_argument(
        "--all-types",
        action="store_true",
        help="every covered type; only workloads no other covered workload controls",
    )
    get.add_argument(
        "--phase",
        action="append",
        dest="phases",
        default=[],
        type=_phase,
        metavar="PHASE",
        help=f"only workloads in this phase (repeatable): {', '.join(PHASES)}",
    )
    get.add_argument("-l", "--selector", default="", help="label selector, kubectl syntax")
    get.add_argument("-A", "--all-namespaces", action="store_true", help="look in every namespace")
    get.add_argument("-o", "--output", choices=("table", "wide", *OUTPUTS[1:]), default="table")
    _cluster(get)

    describe = verbs.add_parser("describe", help="components, live pods, resources and PodGroup")
    _target(describe)
    describe.add_argument(
        "-f", "--filename", help="a workload manifest, - for stdin (no cluster needed)"
    )
    describe.add_argument("-o", "--output", choices=OUTPUTS, default="table")
    describe.add_argument(
        "--pod-limit",
        type=_count,
        default=0,
        help="pod rows per component in the table, unhealthy first (default: all)",
    )
    _cluster(describe)

    definitions = verbs.add_parser("definitions", help="the catalog plus the cluster's definitions")
    definitions.add_argument("name", nargs="?", help="one definition, by name or type")
    definitions.add_argument("--group", help='only definitions of this API group (core: "")')
    definitions.add_argument("--kind", help="only this kind (needs --group)")
    definitions.add_argument("--version", help="only this version (needs --kind)")
    definitions.add_argument(
        "--component-limit",
        type=_count,
        default=3,
        help="child components listed per definition in the table (0: all)",
    )
    definitions.add_argument("-o", "--output", choices=OUTPUTS, default="table")
    _cluster(definitions)

    validate = verbs.add_parser("validate", help="check a Karta definition file (- for stdin)")
    validate.add_argument("file")
    parser.set_defaults(handler=run)


def _target(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", nargs="?", metavar="TYPE[/NAME]")
    parser.add_argument("name", nargs="?", metavar="NAME")
    parser.add_argument("-n", "--namespace", help="default: the kubeconfig context's")


def _cluster(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kubeconfig", type=Path, help="default: in-cluster, then $KUBECONFIG or ~/.kube/config"
    )
    parser.add_argument(
        "--definition",
        action="append",
        default=[],
        type=Path,
        dest="definition_paths",
        metavar="FILE",
        help="a Karta definition file (- for stdin) used before the cluster's and the catalog's; "
        "repeatable",
    )


def _phase(text: str) -> str:
    for phase in PHASES:
        if phase.lower() == text.lower():
            return phase
    raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(PHASES)}")


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must not be negative")
    return value


def run(args: argparse.Namespace) -> int:
    handlers: dict[str, Callable[[argparse.Namespace], int]] = {
        "get": _get,
        "describe": _describe,
        "definitions": _definitions,
        "validate": _validate,
    }
    try:
        return handlers[args.workload_command](args)
    except WorkloadCliError as error:
        if str(error):  # an empty message: the reason is printed already
            print(f"ERROR: {error}", file=sys.stderr)
        return error.code


def _validate(args: argparse.Namespace) -> int:
    documents = _documents(args.file)
    jq = JqEvaluator()
    code = EXIT_OK
    for document in documents:
        problems = definition_problems(document, jq)
        if problems:
            code = EXIT_FAILED
            print(f"INVALID: {args.file}")
            for problem in problems:
                print(f"  {problem}")
        else:
            kind = document["spec"]["structureDefinition"]["rootComponent"]["kind"]
            gvk = f"{kind.get('group') or 'core'}/{kind['version']}, Kind={kind['kind']}"
            print(f"OK: {args.file} is a valid Karta definition (GVK: {gvk})")
            for warning in load_definition(document, jq, "file").warnings:
                print(f"  warning: {warning}")
    return code


def _get(args: argparse.Namespace) -> int:
    _parse_target(args, name_required=False)
    if args.all_types and args.target:
        raise WorkloadCliError(EXIT_USAGE, "--all-types cannot be combined with a TYPE")
    if not args.all_types and not args.target:
        raise WorkloadCliError(EXIT_USAGE, "a TYPE is required, or --all-types")
    if args.selector and args.name:
        raise WorkloadCliError(EXIT_USAGE, "--selector cannot be combined with a NAME")
    from kai.cli.workload_live import get_workloads

    args.definition_files = read_definition_files(args.definition_paths, JqEvaluator())
    _default_namespace(args)
    listing = _live(lambda: get_workloads(args), args.output)
    if args.output in ("json", "yaml"):
        one = listing.by_name and len(listing.views) == 1
        emit(
            listing.views[0] if one else {"items": listing.views, "count": len(listing.views)},
            args.output,
            sys.stdout,
        )
    elif listing.views:
        workloads_table(listing.views, listing.types, args.output == "wide", sys.stdout)
    else:
        where = "any namespace" if listing.namespace is None else f"namespace {listing.namespace}"
        print(f"No workloads found in {where}.", file=sys.stderr)
    _warn(listing.warnings)
    return EXIT_OK


def _describe(args: argparse.Namespace) -> int:
    if args.filename and args.target:
        raise WorkloadCliError(
            EXIT_USAGE, "-f reads the type from the manifest: give -f FILE or TYPE/NAME, not both"
        )
    if not args.filename and not args.target:
        raise WorkloadCliError(EXIT_USAGE, "give TYPE/NAME, TYPE NAME or -f FILE")
    jq = JqEvaluator()
    files = read_definition_files(args.definition_paths, jq)
    if args.filename:
        documents = _documents(args.filename)
        if len(documents) > 1:
            raise WorkloadCliError(
                EXIT_USAGE, f"{args.filename} holds {len(documents)} documents; describe reads one"
            )
        if not isinstance(documents[0], dict):
            raise WorkloadCliError(EXIT_UNREADABLE, f"{args.filename} is not a Kubernetes object")
        registry = _file_mode_registry(args, files, jq)
        return _print_description(documents[0], registry, args, file_mode=True)
    _parse_target(args, name_required=True)
    from kai.cli.workload_live import read_workload

    args.definition_files = files
    _default_namespace(args)
    workload = _live(lambda: read_workload(args), args.output)
    code = _print_description(workload.obj, workload.registry, args, False, workload.pods)
    _warn(workload.warnings)
    return code


def _file_mode_registry(
    args: argparse.Namespace, files: Sequence[WorkloadDefinition], jq: JqEvaluator
) -> DefinitionRegistry:
    """The catalog and `--definition` files; the cluster's definitions only when `--kubeconfig`
    names a cluster, so a manifest is described without one (the contract) and without waiting
    for a default kubeconfig's server."""
    if args.kubeconfig is None:
        return merged_registry(load_catalog(jq), [], files, jq, [])
    from kai.cli.workload_live import definitions_registry

    registry, warnings = asyncio.run(definitions_registry(args.kubeconfig, files, jq))
    _warn(warnings, prefix="note")
    return registry


def _print_description(
    obj: dict[str, Any],
    registry: DefinitionRegistry,
    args: argparse.Namespace,
    file_mode: bool,
    pods: Sequence[dict[str, Any]] | None = None,
) -> int:
    try:
        document = describe_workload(obj, registry, file_mode=file_mode, pods=pods)
    except NoDefinitionError as error:
        _no_definition(error, args.output)
        return EXIT_FAILED  # the contract's code for a manifest no definition covers
    except (ManifestError, GroupingError, JqError) as error:
        print(f"ERROR: {error}", file=sys.stderr)
        return EXIT_FAILED
    if args.output == "table":
        describe_table(document, sys.stdout, args.pod_limit)
    else:
        emit(document, args.output, sys.stdout)
    return EXIT_OK


def _definitions(args: argparse.Namespace) -> int:
    if args.name and args.group is not None:
        raise WorkloadCliError(EXIT_USAGE, "a NAME and --group both pick definitions: give one")
    if args.kind is not None and args.group is None:
        raise WorkloadCliError(EXIT_USAGE, "--kind needs --group, e.g. --group batch --kind Job")
    if args.version is not None and args.kind is None:
        raise WorkloadCliError(EXIT_USAGE, "--version needs --kind")
    from kai.cli.workload_live import definitions_registry

    jq = JqEvaluator()
    files = read_definition_files(args.definition_paths, jq)
    registry, warnings = asyncio.run(definitions_registry(args.kubeconfig, files, jq))
    _warn(warnings, prefix="note")
    chosen = registry.definitions()
    if args.name:
        found = registry.named(args.name) or registry.resolve_type(args.name)
        if found is None:
            raise WorkloadCliError(EXIT_FAILED, f"no definition named {args.name!r}")
        chosen = [found]
    elif args.group is not None:
        chosen = [d for d in chosen if _covers(d, args.group, args.kind, args.version)]
        if not chosen:
            wanted = "/".join(p for p in (args.group, args.version, args.kind) if p)
            raise WorkloadCliError(EXIT_FAILED, f"no definition covers {wanted or 'core'}")
    if args.output == "table":
        definitions_table(sorted(chosen, key=lambda d: d.name), args.component_limit, sys.stdout)
    elif args.output == "json":
        documents = [apply_ready(d) for d in chosen]
        emit(
            documents[0] if args.name else {"items": documents, "count": len(documents)},
            "json",
            sys.stdout,
        )
    else:  # a YAML stream kubectl apply -f and `kai workload validate -` take as it is
        sys.stdout.write(yaml.safe_dump_all([apply_ready(d) for d in chosen], sort_keys=False))
    return EXIT_OK


def _covers(
    definition: WorkloadDefinition, group: str, kind: str | None, version: str | None
) -> bool:
    gvk = definition.gvk
    return (
        gvk.group == ("" if group == "core" else group)
        and (kind is None or gvk.kind.lower() == kind.lower())
        and (version is None or gvk.version == version)
    )


def apply_ready(definition: WorkloadDefinition) -> dict[str, Any]:
    """The definition as a Karta to apply: what the server adds (uid, resourceVersion,
    managedFields, status) dropped, and the lookup labels KAI finds definitions by filled in
    from the root kind where missing, so an applied copy is found without the operator that
    stamps them."""
    document = definition.document
    meta = document.get("metadata") or {}
    gvk = definition.gvk
    labels = {
        "run.ai/karta-group": gvk.group,
        "run.ai/karta-version": gvk.version,
        "run.ai/karta-kind": gvk.kind,
        **(meta.get("labels") or {}),
    }
    annotations = {
        key: value
        for key, value in (meta.get("annotations") or {}).items()
        if key != "kubectl.kubernetes.io/last-applied-configuration"
    }
    kept: dict[str, Any] = {"name": definition.name, "labels": labels}
    if annotations:
        kept["annotations"] = annotations
    return {
        "apiVersion": document.get("apiVersion"),
        "kind": document.get("kind"),
        "metadata": kept,
        "spec": document.get("spec"),
    }


def read_definition_files(paths: Iterable[Path], jq: JqEvaluator) -> list[WorkloadDefinition]:
    """The definitions of `--definition` files (origin `file`); one invalid is an error (exit 1)
    naming every problem, since a command silently falling back to the catalog would describe the
    workload with another definition than the one asked for."""
    definitions = []
    for path in paths:
        for document in _documents(str(path)):
            try:
                definitions.append(load_definition(document, jq, "file"))
            except InvalidDefinitionError as error:
                listed = "\n  ".join(str(problem) for problem in error.problems)
                raise WorkloadCliError(EXIT_FAILED, f"{path}: {error.name}:\n  {listed}") from None
    return definitions


def merged_registry(
    catalog: Sequence[WorkloadDefinition],
    cluster: Sequence[WorkloadDefinition],
    files: Sequence[WorkloadDefinition],
    jq: JqEvaluator,
    warnings: list[str],
) -> DefinitionRegistry:
    """Catalog, cluster and file definitions, each overriding the one before for the same type.

    Two cluster definitions of one type leave it to the catalog, with a warning (KAI uses
    neither); two files of one type are an error.
    """
    claims: dict[Any, list[str]] = {}
    for definition in cluster:
        claims.setdefault(definition.gvk, []).append(definition.name)
    for gvk, names in claims.items():
        if len(names) > 1:
            warnings.append(
                f"{len(names)} cluster definitions claim {gvk} ({', '.join(names)}); "
                "neither is used"
            )
    overridden = {definition.gvk for definition in files}
    kept = [d for d in cluster if len(claims[d.gvk]) == 1 and d.gvk not in overridden]
    try:
        return DefinitionRegistry(catalog=catalog, cluster=[*kept, *files], jq=jq)
    except DuplicateDefinitionError as error:
        raise WorkloadCliError(EXIT_USAGE, f"--definition: {error}") from None


def _documents(path: str) -> list[Any]:
    """The non-empty YAML documents of a file, or of stdin for `-` (exit 2 when unreadable)."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
        documents = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except (OSError, yaml.YAMLError) as error:
        raise WorkloadCliError(EXIT_UNREADABLE, f"cannot read {path}: {error}") from None
    if not documents:
        raise WorkloadCliError(EXIT_UNREADABLE, f"{path} holds no document")
    return documents


def _parse_target(args: argparse.Namespace, name_required: bool) -> None:
    """`TYPE`, `TYPE/NAME` or `TYPE NAME` into `args.type_word` and `args.name`, as kubectl
    reads them."""
    word, slash, name = (args.target or "").partition("/")
    if slash and not name:
        raise WorkloadCliError(EXIT_USAGE, f"NAME is empty in {args.target!r}")
    if args.name is not None:
        if name:
            raise WorkloadCliError(EXIT_USAGE, f"NAME given twice: {name!r} and {args.name!r}")
        name = args.name
    if "/" in name:
        raise WorkloadCliError(EXIT_USAGE, f"NAME must not contain '/': {name!r}")
    if args.target is not None and not word:
        raise WorkloadCliError(EXIT_USAGE, f"TYPE is empty in {args.target!r}")
    if name_required and not name:
        raise WorkloadCliError(EXIT_USAGE, "a NAME is required: give it as TYPE/NAME or TYPE NAME")
    args.type_word, args.name = word, name or None


def _default_namespace(args: argparse.Namespace) -> None:
    from kai.kube.client import context_namespace

    if args.namespace is None:
        args.namespace = context_namespace(args.kubeconfig)


def _live(call: Callable[[], Coroutine[Any, Any, T]], output: str) -> T:
    """What a live read returns; a failure becomes the WorkloadCliError of its exit code. A type
    no definition covers also puts the contract's error document on stdout under -o json|yaml,
    where a program reads it."""
    from kubernetes_asyncio.config import ConfigException

    from kai.kube.client import ApiError

    try:
        return asyncio.run(call())
    except NoDefinitionError as error:
        _no_definition(error, output)
        # kli's code for a TYPE no definition covers; the reason is printed already
        raise WorkloadCliError(EXIT_NO_DEFINITION, "") from None
    except (ApiError, ConfigException, OSError) as error:
        raise WorkloadCliError(EXIT_FAILED, f"cannot read the cluster: {error}") from None


def _no_definition(error: NoDefinitionError, output: str) -> None:
    """The reason on stderr for a person; under -o json|yaml the contract's error document on
    stdout too, where a program reads."""
    print(f"ERROR: {error}", file=sys.stderr)
    if output in ("json", "yaml"):
        emit(error.document(), output, sys.stdout)


def _warn(warnings: Sequence[str], prefix: str = "warning") -> None:
    """After the output, so a long table cannot scroll them out of view."""
    for warning in warnings:
        print(f"{prefix}: {warning}", file=sys.stderr)
