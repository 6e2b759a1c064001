"""`kai workload`: describe workloads, list definitions, validate definition files.

Implements contracts/workload.md: `describe -f FILE` and `validate` need no
cluster; `describe TYPE/NAME` and `definitions` read the cluster's Karta objects
(which override catalog definitions of the same type) and fall back to the
catalog alone, with a note on stderr, when there is no cluster to read.
Exit codes: 0 success, 1 a failure about the input (invalid definition, unknown
type), 2 an input that cannot be read.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from typing import Any, TextIO

import yaml

from kai.api.errors import ManifestError
from kai.cli.describe import NoDefinitionError, describe_workload
from kai.cli.output import emit, table
from kai.grouping import GroupingError
from kai.workloads.catalog import load_catalog
from kai.workloads.definition import WorkloadDefinition
from kai.workloads.jqeval import JqError, JqEvaluator
from kai.workloads.loader import definition_problems
from kai.workloads.registry import DefinitionRegistry

OUTPUTS = ("table", "json", "yaml")
EXIT_OK, EXIT_FAILED, EXIT_UNREADABLE = 0, 1, 2


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("workload", help="describe workloads through their definitions")
    verbs = parser.add_subparsers(dest="workload_command", required=True)
    describe = verbs.add_parser("describe", help="components, resources, status and PodGroup")
    describe.add_argument("target", nargs="?", help="TYPE/NAME of a live workload")
    describe.add_argument("-f", "--filename", help="a workload manifest (no cluster needed)")
    describe.add_argument("-n", "--namespace", default="default")
    describe.add_argument("-o", "--output", choices=OUTPUTS, default="table")
    definitions = verbs.add_parser("definitions", help="the catalog plus the cluster's definitions")
    definitions.add_argument("name", nargs="?")
    definitions.add_argument("-o", "--output", choices=OUTPUTS, default="table")
    validate = verbs.add_parser("validate", help="check a Karta definition file (- for stdin)")
    validate.add_argument("file")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    handlers: dict[str, Callable[[argparse.Namespace], int]] = {
        "describe": _describe,
        "definitions": _definitions,
        "validate": _validate,
    }
    return handlers[args.workload_command](args)


def _validate(args: argparse.Namespace) -> int:
    try:
        text = sys.stdin.read() if args.file == "-" else open(args.file).read()  # noqa: SIM115
        documents = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except (OSError, yaml.YAMLError) as error:
        print(f"ERROR: cannot read {args.file}: {error}", file=sys.stderr)
        return EXIT_UNREADABLE
    if not documents:
        print(f"ERROR: {args.file} holds no document", file=sys.stderr)
        return EXIT_UNREADABLE
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
    return code


def _describe(args: argparse.Namespace) -> int:
    if bool(args.filename) == bool(args.target):
        print("ERROR: give either -f FILE or TYPE/NAME", file=sys.stderr)
        return EXIT_UNREADABLE
    if args.filename:
        try:
            with open(args.filename) as handle:
                obj = yaml.safe_load(handle)
        except (OSError, yaml.YAMLError) as error:
            print(f"ERROR: cannot read {args.filename}: {error}", file=sys.stderr)
            return EXIT_UNREADABLE
        if not isinstance(obj, dict):
            print(f"ERROR: {args.filename} is not a Kubernetes object", file=sys.stderr)
            return EXIT_UNREADABLE
        registry = DefinitionRegistry(catalog=load_catalog(JqEvaluator()))
        return _print_description(obj, registry, args.output, file_mode=True)
    registry = _registry_with_cluster()
    type_text, _, name = args.target.partition("/")
    definition = registry.resolve_type(type_text)
    if definition is None or not name:
        print(f"ERROR: unknown workload type or missing name in {args.target!r}", file=sys.stderr)
        return EXIT_FAILED
    gvk = definition.gvk
    from kai.workloads.cluster import read_object  # see kai/cli/main.py: imported when used

    try:
        obj = asyncio.run(read_object(gvk.api_version, gvk.kind, args.namespace, name))
    except Exception as error:  # any API or kubeconfig failure ends the command
        print(f"ERROR: cannot read {gvk.kind} {args.namespace}/{name}: {error}", file=sys.stderr)
        return EXIT_FAILED
    return _print_description(obj, registry, args.output, file_mode=False)


def _print_description(
    obj: dict[str, Any], registry: DefinitionRegistry, output: str, file_mode: bool
) -> int:
    try:
        document = describe_workload(obj, registry, file_mode=file_mode)
    except NoDefinitionError as error:
        if output == "table":
            print(f"ERROR: {error}", file=sys.stderr)
        else:
            emit(error.document(), output, sys.stdout)
        return EXIT_FAILED
    except (ManifestError, GroupingError, JqError) as error:
        print(f"ERROR: {error}", file=sys.stderr)
        return EXIT_FAILED
    if output == "table":
        _describe_table(document, sys.stdout)
    else:
        emit(document, output, sys.stdout)
    return EXIT_OK


def _definitions(args: argparse.Namespace) -> int:
    registry = _registry_with_cluster()
    chosen = registry.definitions()
    if args.name:
        found = registry.named(args.name) or registry.resolve_type(args.name)
        if found is None:
            print(f"ERROR: no definition named {args.name!r}", file=sys.stderr)
            return EXIT_FAILED
        chosen = [found]
        if args.output == "yaml":
            print(yaml.safe_dump(found.document, sort_keys=False), end="")
            return EXIT_OK
    if args.output == "table":
        rows = [("NAME", "KIND", "ORIGIN", "COMPONENTS")]
        rows += [(d.name, str(d.gvk), d.origin, _component_list(d)) for d in chosen]
        table(rows, sys.stdout)
    else:
        emit([_definition_summary(d) for d in chosen], args.output, sys.stdout)
    return EXIT_OK


def _registry_with_cluster() -> DefinitionRegistry:
    from kai.workloads.cluster import cluster_definitions  # see kai/cli/main.py

    jq = JqEvaluator()
    catalog = load_catalog(jq)
    try:
        cluster, problems = asyncio.run(cluster_definitions(jq))
    except Exception as error:  # no cluster: the catalog alone is still useful
        print(f"note: using the built-in catalog only ({type(error).__name__})", file=sys.stderr)
        return DefinitionRegistry(catalog=catalog, jq=jq)
    for problem in problems:
        print(f"note: skipped {problem}", file=sys.stderr)
    return DefinitionRegistry(catalog=catalog, cluster=cluster, jq=jq)


def _definition_summary(definition: WorkloadDefinition) -> dict[str, Any]:
    return {
        "name": definition.name,
        "apiVersion": definition.gvk.api_version,
        "kind": definition.gvk.kind,
        "origin": definition.origin,
        "components": [c.name for c in definition.components],
        "gangScheduling": not definition.gang.is_empty,
    }


def _component_list(definition: WorkloadDefinition, limit: int = 3) -> str:
    names = [c.name for c in definition.components]
    shown = names[: limit + 1]
    extra = len(names) - len(shown)
    return ", ".join(shown) + (f", +{extra} more" if extra else "")


def _describe_table(document: dict[str, Any], out: TextIO) -> None:
    out.write(f"{document['kind']}/{document['name']}  namespace: {document['namespace']}\n")
    out.write(f"Definition: {document['definition']} ({document['origin']})\n")
    out.write(f"Phase: {', '.join(document['phases'])}\n\n")
    rows = [("COMPONENT", "KIND", "REPLICAS", "PODS", "GPU", "CPU", "MEMORY")]
    depth: dict[str, int] = {}
    for entry in document["components"]:
        depth[entry["component"]] = depth.get(entry["parent"], -1) + 1
        indent = "  " * depth[entry["component"]]
        resources = entry["resources"]
        rows.append(
            (
                indent + entry["name"],
                entry["kind"] or "-",
                str(entry["replicas"]),
                str(entry["pods"]),
                str(resources["gpus"]),
                f"{resources['cpuMillis']}m",
                _bytes(resources["memoryBytes"]),
            )
        )
    total = document["resources"]
    rows.append(
        (
            "TOTAL",
            "",
            "",
            "",
            str(total["gpus"]),
            f"{total['cpuMillis']}m",
            _bytes(total["memoryBytes"]),
        )
    )
    table(rows, out)
    for group in document["podGroups"]:
        out.write(
            f"\nPodGroup {group['name']}: queue {group['queue']}, priority {group['priorityClassName']}, "
            f"minMember {group['minMember']}, {group['pods']} pod(s)\n"
        )
        _write_subgroups(group.get("subGroups", []), out, "  ")


def _write_subgroups(subgroups: list[dict[str, Any]], out: TextIO, indent: str) -> None:
    for sub in subgroups:
        out.write(f"{indent}{sub['name']}: minMember {sub['minMember']}\n")
        _write_subgroups(sub.get("subGroups", []), out, indent + "  ")


def _bytes(value: int) -> str:
    for unit, size in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if value >= size and value % size == 0:
            return f"{value // size}{unit}"
    return str(value)
