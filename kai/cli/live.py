"""`kai queues`, `kai why`, `kai nodes`: a running cluster, kubectl-style, in kai's terms.

    kai queues [-o table|wide|json|yaml] [--kubeconfig PATH]
    kai why [POD | pod/NAME | podgroup/NAME] [-n NS | -A] [-o ...] [--kubeconfig PATH]
    kai nodes [NODE ...] [-o ...] [--kubeconfig PATH] [--reservation-namespace NS]

Also `kubectl kai ...` (the `kubectl-kai` plugin). Only arguments are declared here,
with light imports; the handlers import `kai.inspect` (and with it the Kubernetes
client) when they run. Exit codes: 0 answered (a malformed object in the cluster is a
`warning:` line on stderr and an entry of the document's `problems`), 1 the cluster
could not be read or the object asked about does not exist, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from kai.api.constants import RESERVATION_NAMESPACE
from kai.cli.arguments import kubeconfig_file
from kai.cli.output import emit, logs_to_stderr, table

OUTPUTS = ("table", "wide", "json", "yaml")
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
T = TypeVar("T")


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    queues = commands.add_parser(
        "queues",
        help="the queue tree: deserved, fair share, allocated, requested, limit, what is pending",
    )
    _common(queues)
    queues.set_defaults(handler=_queues)

    why = commands.add_parser(
        "why", help="why a pod or PodGroup is pending: the scheduler's reason, with its numbers"
    )
    why.add_argument(
        "target", nargs="?", help="POD, pod/NAME or podgroup/NAME (none: every pending PodGroup)"
    )
    why.add_argument("-n", "--namespace", help="default: the kubeconfig context's")
    why.add_argument(
        "-A", "--all-namespaces", action="store_true", help="list pending PodGroups everywhere"
    )
    _common(why)
    why.set_defaults(handler=_why)

    nodes = commands.add_parser(
        "nodes", help="per node and GPU device: what holds it, free devices and free share"
    )
    nodes.add_argument("names", nargs="*", metavar="NODE", help="only these nodes")
    nodes.add_argument(
        "--reservation-namespace",
        default=RESERVATION_NAMESPACE,
        help=f"where the GPU reservation pods are (default {RESERVATION_NAMESPACE})",
    )
    _common(nodes)
    nodes.set_defaults(handler=_nodes)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", choices=OUTPUTS, default="table")
    parser.add_argument(
        "--kubeconfig",
        type=kubeconfig_file,
        help="default: in-cluster, then $KUBECONFIG or ~/.kube/config",
    )


def _queues(args: argparse.Namespace) -> int:
    from kai.inspect.ask import ask_queues

    report = _answer(args, ask_queues)
    if report is None:
        return EXIT_FAILED
    _show(report, args.output, report.problems, "No queues found.")
    return EXIT_OK


def _nodes(args: argparse.Namespace) -> int:
    from kai.inspect.ask import ask_nodes

    report = _answer(
        args, lambda cluster: ask_nodes(cluster, args.names, args.reservation_namespace)
    )
    if report is None:
        return EXIT_FAILED
    _show(report, args.output, report.problems, "No nodes found.")
    return EXIT_OK


def _why(args: argparse.Namespace) -> int:
    from kai.inspect.ask import ask_pending, ask_why
    from kai.inspect.why import GroupAnswer, Target, pending_rows
    from kai.kube.client import context_namespace

    if args.target and args.all_namespaces:
        print(
            "ERROR: a pod or PodGroup is looked up in one namespace: use -n, not -A",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        target = Target.parse(args.target) if args.target else None
    except ValueError as error:
        print(f"ERROR: {error}", file=sys.stderr)
        return EXIT_USAGE
    namespace = (
        None if args.all_namespaces else args.namespace or context_namespace(args.kubeconfig)
    )
    if target is None:
        answers = _answer(args, lambda cluster: ask_pending(cluster, namespace))
        if answers is None:
            return EXIT_FAILED
        problems = [problem for answer in answers for problem in answer.problems]
        if args.output in ("json", "yaml"):
            emit({"podGroups": [a.document() for a in answers]}, args.output, sys.stdout)
        elif answers:
            table(pending_rows(answers, all_namespaces=namespace is None), sys.stdout)
        else:
            where = "any namespace" if namespace is None else f"namespace {namespace}"
            print(f"No pending PodGroups in {where}.", file=sys.stderr)
        _warn(problems, args.output)
        return EXIT_OK
    assert namespace is not None
    answer = _answer(args, lambda cluster: ask_why(cluster, namespace, target))
    if answer is None:
        return EXIT_FAILED
    if args.output in ("json", "yaml"):
        emit(answer.document(), args.output, sys.stdout)
        return EXIT_OK
    sys.stdout.write("".join(line + "\n" for line in answer.header()))
    if isinstance(answer, GroupAnswer):
        for title, rows in (("Pods:", answer.pod_rows()), ("Events:", answer.event_rows())):
            if len(rows) > 1:
                print(title)
                table(rows, sys.stdout, indent="  ")
        _warn(answer.problems, args.output)
    return EXIT_OK


def _answer(args: argparse.Namespace, ask: Callable[[Any], Awaitable[T]]) -> T | None:
    """The question asked of the cluster; None, with the reason on stderr, when it cannot be."""
    from kubernetes_asyncio.config import ConfigException

    from kai.inspect.ask import NotFoundError
    from kai.inspect.read import reading
    from kai.kube.client import ApiError

    async def asked() -> T:
        async with reading(args.kubeconfig) as cluster:
            return await ask(cluster)

    logs_to_stderr()
    try:
        return asyncio.run(asked())
    except NotFoundError as error:
        print(f"ERROR: {error}", file=sys.stderr)
    except (ApiError, ConfigException, OSError) as error:
        print(f"ERROR: cannot read the cluster: {error}", file=sys.stderr)
    return None


def _show(report: Any, output: str, problems: Sequence[str], empty: str) -> None:
    if output in ("json", "yaml"):
        emit(report.document(), output, sys.stdout)
        return
    rows = report.rows(wide=output == "wide")
    if len(rows) > 1:
        table(rows, sys.stdout)
    else:
        print(empty, file=sys.stderr)
    _warn(problems, output)


def _warn(problems: Sequence[str], output: str) -> None:
    """Problems with objects go to stderr beside a table; documents carry them in `problems`."""
    if output in ("table", "wide"):
        for problem in problems:
            print(f"warning: {problem}", file=sys.stderr)
