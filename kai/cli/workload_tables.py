"""The tables `kai workload` prints for people; programs read the documents under -o json|yaml.

Each table is drawn from the same document or view the machine formats emit, so what a
person reads and what a script parses cannot drift. Columns follow upstream's `kli`
(`get`: NAME NAMESPACE [TYPE] PHASE AGE, ORIGIN with -o wide; `definitions`: NAME KIND
ORIGIN COMPONENTS), with kai's own additions to `describe` (the PodGroups the grouper
would create) kept.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

from kai.cli.output import table
from kai.workloads.definition import WorkloadDefinition


def workloads_table(
    views: Sequence[Mapping[str, Any]], types: Sequence[str] | None, wide: bool, out: TextIO
) -> None:
    """One row per workload; every matched phase, comma-joined, since hiding one misreports."""
    now = datetime.now(UTC)
    header = ["NAME", "NAMESPACE", *(["TYPE"] if types is not None else []), "PHASE", "AGE"]
    rows = [header + (["ORIGIN"] if wide else [])]
    for index, view in enumerate(views):
        row = [str(view["name"]), str(view["namespace"])]
        if types is not None:
            row.append(types[index])
        row += [",".join(view["phases"]), age(view.get("createdAt"), now)]
        if wide:
            row.append(str(view["origin"]))
        rows.append(row)
    table(rows, out)


def definitions_table(
    definitions: Sequence[WorkloadDefinition], component_limit: int, out: TextIO
) -> None:
    """COMPONENTS lists the root and `component_limit` children (0: all), then `+N more`."""
    rows = [("NAME", "KIND", "ORIGIN", "COMPONENTS")]
    for definition in definitions:
        names = [c.name for c in definition.components]
        shown = names if component_limit == 0 else names[: component_limit + 1]
        extra = len(names) - len(shown)
        cell = ", ".join(shown) + (f", +{extra} more" if extra else "")
        rows.append((definition.name, str(definition.gvk), definition.origin, cell))
    table(rows, out)


def describe_table(document: Mapping[str, Any], out: TextIO, pod_limit: int = 0) -> None:
    """Header and phase, the components with what the spec asks for (and, live, how many of
    their pods are ready), the live pods of each component, then the PodGroups."""
    live = "live" in document
    head = f"{document['kind']}/{document['name']}  namespace: {document['namespace']}"
    if live:
        head += f"  age: {age(document.get('createdAt'), datetime.now(UTC))}"
    out.write(head + "\n")
    out.write(f"Definition: {document['definition']} ({document['origin']})\n")
    out.write(f"Phase: {', '.join(document['phases'])}\n\n")
    table(_component_rows(document, live), out)
    if live:
        _write_pods(document, out, pod_limit)
    for group in document["podGroups"]:
        out.write(
            f"\nPodGroup {group['name']}: queue {group['queue']}, priority {group['priorityClassName']}, "
            f"minMember {group['minMember']}, {group['pods']} pod(s)\n"
        )
        _write_subgroups(group.get("subGroups", []), out, "  ")


def _component_rows(document: Mapping[str, Any], live: bool) -> list[list[str]]:
    header = ["COMPONENT", "KIND", "REPLICAS", "PODS", *(["READY"] if live else [])]
    rows = [[*header, "GPU", "CPU", "MEMORY"]]
    depth: dict[str, int] = {}
    for entry in document["components"]:
        depth[entry["component"]] = depth.get(entry["parent"], -1) + 1
        row = [
            "  " * depth[entry["component"]] + entry["name"],
            entry["kind"] or "-",
            str(entry["replicas"]),
            str(entry["pods"]),
        ]
        if live:
            row.append(f"{entry['live']['ready']}/{entry['pods']}")
        rows.append(row + _resource_cells(entry["resources"]))
    blank = ["TOTAL", "", "", "", *([""] if live else [])]
    rows.append(blank + _resource_cells(document["resources"]))
    return rows


def _resource_cells(resources: Mapping[str, Any]) -> list[str]:
    return [
        str(resources["gpus"]),
        f"{resources['cpuMillis']}m",
        _bytes(resources["memoryBytes"]),
    ]


def _write_pods(document: Mapping[str, Any], out: TextIO, pod_limit: int) -> None:
    """Each component's own pods (a logical component's are its children's, shown there), then
    the pods the workload owns that no component claims."""
    sections: list[tuple[str, Mapping[str, Any], list[Mapping[str, Any]]]] = []
    entries = document["components"]
    for index, entry in enumerate(entries):
        below = {
            pod["name"]
            for child in _descendant_entries(entries, index)
            for pod in child["live"]["pods"]
        }
        own = [pod for pod in entry["live"]["pods"] if pod["name"] not in below]
        if own:
            sections.append((entry["name"], entry["live"], own))
    stray = document["live"]["unattributed"]
    if stray:
        sections.append(("(no component)", {"phases": Counter(p["phase"] for p in stray)}, stray))
    if not sections:
        out.write("\nPods: none\n")
        return
    out.write("\nPods:\n")
    for title, summary, pods in sections:
        counts = ", ".join(f"{n} {phase}" for phase, n in summary["phases"].items())
        out.write(f"  {title}: {counts}\n")
        shown, hidden = _limited(pods, pod_limit)
        rows = [[pod["name"], _status(pod), pod["node"] or "<none>"] for pod in shown]
        table([["POD", "STATUS", "NODE"], *rows], out, indent="    ")
        if hidden:
            unhealthy = sum(1 for pod in pods if _unhealthy(pod))
            kept = sum(1 for pod in shown if _unhealthy(pod))
            out.write(f"    ... and {hidden} more ({kept} of {unhealthy} unhealthy shown)\n")


def _descendant_entries(
    entries: Sequence[Mapping[str, Any]], index: int
) -> list[Mapping[str, Any]]:
    names = {entries[index]["component"]}
    found = []
    for entry in entries[index + 1 :]:
        if entry["parent"] in names:
            names.add(entry["component"])
            found.append(entry)
    return found


def _limited(pods: Sequence[Mapping[str, Any]], limit: int) -> tuple[list[Mapping[str, Any]], int]:
    """At most `limit` pods (0: all), unhealthy ones first: they are the ones a reader needs."""
    if limit == 0 or len(pods) <= limit:
        return list(pods), 0
    ordered = sorted(pods, key=lambda pod: not _unhealthy(pod))
    return ordered[:limit], len(pods) - limit


def _unhealthy(pod: Mapping[str, Any]) -> bool:
    """Not ready and not finished: a completed pod is not ready either, but needs no one."""
    return not pod["ready"] and pod["phase"] != "Succeeded"


def _status(pod: Mapping[str, Any]) -> str:
    return f"{pod['phase']} ({pod['reason']})" if pod.get("reason") else str(pod["phase"])


def _write_subgroups(subgroups: list[dict[str, Any]], out: TextIO, indent: str) -> None:
    for sub in subgroups:
        out.write(f"{indent}{sub['name']}: minMember {sub['minMember']}\n")
        _write_subgroups(sub.get("subGroups", []), out, indent + "  ")


def _bytes(value: int) -> str:
    for unit, size in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if value >= size and value % size == 0:
            return f"{value // size}{unit}"
    return str(value)


def age(created_at: Any, now: datetime) -> str:
    """How long ago, as kubectl writes it (`45s`, `3m12s`, `5h`, `12d`); `<unknown>` without a
    timestamp (a manifest never submitted)."""
    try:
        then = datetime.fromisoformat(str(created_at).replace("Z", "+00:00"))
    except ValueError:
        return "<unknown>"
    seconds = max(0, int((now - then).total_seconds()))
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if seconds < 120:
        return f"{seconds}s"
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 192:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    years = days // 365
    if years < 8:
        return f"{years}y{days % 365}d" if days % 365 else f"{years}y"
    return f"{years}y"
