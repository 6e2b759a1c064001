"""The `kai simulate` output document, and its table rendering for people.

The document's shape is fixed by the contract (shared/contracts/simulate.md):
rounds with bound / evicted / pipelined pods (and, beyond the contract, the pods
preempt took back before they were bound), the pods after the last round,
PodGroups with reasons and messages, and queues with deserved, fair share and
allocated. Lists are sorted so two runs on the same input print the same bytes.
"""

from __future__ import annotations

import io
import json
from collections import Counter
from collections.abc import Iterable
from fractions import Fraction
from typing import Any

import yaml

from kai.api.podgroups import stamp_annotations
from kai.engine.accounting import accounting_device_memory, queue_shares
from kai.engine.cycle import CycleResult
from kai.engine.evictions.decisions import Eviction
from kai.engine.gangs import pod_resources
from kai.engine.model import UNLIMITED, PodPhase
from kai.engine.resources import Resources
from kai.simulate.rounds import Simulation


def _gpus(value: Fraction) -> float | int:
    return int(value) if value.denominator == 1 else round(float(value), 6)


def build_document(simulation: Simulation) -> dict[str, Any]:
    final = simulation.final
    nodes = {node.name: node for node in final.nodes}
    rounds = [_round(number, result) for number, result in enumerate(simulation.rounds, start=1)]
    pods: dict[str, Any] = {}
    running: Counter[str] = Counter()
    pending_memory = accounting_device_memory(final)
    for pod in sorted(final.pods, key=lambda p: p.key):
        if not pod.scheduler_is_ours:
            continue
        placed = pod.phase is PodPhase.BOUND and pod.node is not None
        memory = nodes[pod.node].gpu_memory_mib if placed and pod.node in nodes else pending_memory
        gpus = pod_resources(pod, memory).gpu
        pods[pod.key] = {
            "node": pod.node if placed else None,
            "phase": "Running" if placed else "Pending",
            "gpus": _gpus(gpus),
            "gpuGroups": sorted(pod.gpu_groups),
        }
        if placed:
            running[pod.group] += 1
    last = simulation.rounds[-1] if simulation.rounds else None
    groups: dict[str, Any] = {}
    for group in sorted(final.pod_groups, key=lambda g: g.key):
        decision = last.groups.get(group.key) if last else None
        groups[group.key] = {
            "queue": group.queue,
            "minMember": group.min_member,
            "running": running[group.key],
            "scheduled": running[group.key] >= max(group.min_member, 1),
            "reasons": [decision.reason] if decision and decision.reason else [],
            "message": decision.message if decision else "",
        }
    for item in final.set_aside:
        groups.setdefault(
            item.group,
            {
                "queue": item.queue,
                "minMember": 0,
                "running": 0,
                "scheduled": False,
                "reasons": [item.reason],
                "message": item.message,
            },
        )
    shares = queue_shares(final)
    queues = {
        name: {
            "deserved": _resources(share.deserved),
            "fairShare": _resources(share.fair_share),
            "allocated": _resources(share.allocated),
            "limit": _resources(share.limit),
        }
        for name, share in sorted(shares.items())
    }
    return {"rounds": rounds, "pods": pods, "podGroups": groups, "queues": queues}


def _round(number: int, result: CycleResult) -> dict[str, Any]:
    return {
        "round": number,
        "bound": [
            {"pod": b.pod, "node": b.node, "gpus": _gpus(b.gpus), "gpuGroups": sorted(b.gpu_groups)}
            for b in sorted(result.bindings, key=lambda b: (b.pod, b.node))
        ],
        "evicted": _evictions(result.evictions),
        # Placed by the allocation, then taken by preempt before binding: neither bound nor
        # evicted (an extension of the contract's round).
        "takenBack": _evictions(result.taken_back),
        "pipelined": [
            {"pod": p.pod, "node": p.node, "gpuGroups": sorted(p.gpu_groups)}
            for p in sorted(result.pipelined, key=lambda p: (p.pod, p.node))
        ],
        "annotations": {
            key: stamp_annotations(s.last_start, s.stale_since, s.last_eviction)
            for key, s in sorted(result.stamps.items())
        },
        "engine": {
            "answer": result.report.answer,
            "solverStatus": result.report.status,
            "gpusAllocated": _gpus(result.report.gpus_engine),
            "gpusAllocatedByGreedy": _gpus(result.report.gpus_greedy),
            # Answers the independent validator rejected (the cycle then falls back): 0 unless
            # the engine has a bug, so scenario tests assert it.
            "validatorViolations": result.report.validator_violations
            + (result.eviction_report.validator_violations if result.eviction_report else 0),
            **_victim_search(result),
        },
    }


def _evictions(evictions: Iterable[Eviction]) -> list[dict[str, Any]]:
    return [
        {"pod": e.pod, "node": e.node, "action": e.action.value, "rule": e.rule, "for": e.preemptor}
        for e in sorted(evictions, key=lambda e: (e.pod, e.node))
    ]


def _victim_search(result: CycleResult) -> dict[str, Any]:
    """Which search chose the victims of each committed eviction decision."""
    report = result.eviction_report
    if report is None or not (report.cp_sat_answers or report.greedy_answers):
        return {}
    return {"victimsFrom": {"cp-sat": report.cp_sat_answers, "greedy": report.greedy_answers}}


def _resources(value: Resources) -> dict[str, float | int]:
    def number(amount: Fraction, unlimited_ok: bool) -> float | int:
        if unlimited_ok and amount == UNLIMITED:
            return -1
        return _gpus(amount)

    return {
        "gpu": number(value.gpu, True),
        "cpu": number(value.cpu, True),
        "memory": number(value.memory, True),
    }


def render(document: dict[str, Any], output: str) -> str:
    if output == "json":
        return json.dumps(document, indent=2, sort_keys=False) + "\n"
    if output == "yaml":
        return yaml.safe_dump(document, sort_keys=False)
    return render_table(document)


def render_table(document: dict[str, Any]) -> str:
    out = io.StringIO()
    for round_doc in document["rounds"]:
        engine = round_doc["engine"]
        out.write(
            f"Round {round_doc['round']}: {len(round_doc['bound'])} pods bound "
            f"({engine['gpusAllocated']} GPUs; greedy alone {engine['gpusAllocatedByGreedy']}; "
            f"answer from {engine['answer']}, solver {engine['solverStatus']}), "
            f"{len(round_doc['evicted'])} evicted, {len(round_doc['pipelined'])} pipelined\n"
        )
        for eviction in round_doc["evicted"]:
            made_for = f" for {eviction['for']}" if eviction["for"] else ""
            out.write(
                f"  evicted {eviction['pod']} from {eviction['node']}: {eviction['action']} "
                f"({eviction['rule']}){made_for}\n"
            )
        for taken in round_doc["takenBack"]:
            out.write(
                f"  took back {taken['pod']} from {taken['node']} before it was bound: "
                f"{taken['action']} ({taken['rule']}) for {taken['for']}\n"
            )
        for waiting in round_doc["pipelined"]:
            out.write(f"  pipelined {waiting['pod']} on {waiting['node']}\n")
    out.write("\nPODS\n")
    _table(
        out,
        ["POD", "PHASE", "NODE", "GPUS", "GPU GROUPS"],
        [
            [
                key,
                pod["phase"],
                pod["node"] or "-",
                str(pod["gpus"]),
                ",".join(group[:8] for group in pod["gpuGroups"]) or "-",
            ]
            for key, pod in document["pods"].items()
        ],
    )
    out.write("\nPOD GROUPS\n")
    _table(
        out,
        ["PODGROUP", "QUEUE", "MIN", "RUNNING", "SCHEDULED", "REASON", "MESSAGE"],
        [
            [
                key,
                g["queue"],
                str(g["minMember"]),
                str(g["running"]),
                "yes" if g["scheduled"] else "no",
                ",".join(g["reasons"]) or "-",
                g["message"] or "-",
            ]
            for key, g in document["podGroups"].items()
        ],
    )
    out.write("\nQUEUES (gpu devices / cpu millicores / memory GiB)\n")
    _table(
        out,
        ["QUEUE", "DESERVED", "FAIR SHARE", "ALLOCATED", "LIMIT"],
        [
            [
                name,
                _triple(q["deserved"]),
                _triple(q["fairShare"]),
                _triple(q["allocated"]),
                _triple(q["limit"]),
            ]
            for name, q in document["queues"].items()
        ],
    )
    return out.getvalue()


def _triple(value: dict[str, float | int]) -> str:
    memory = value["memory"]
    memory_text = "inf" if memory == -1 else f"{memory / 2**30:.1f}"
    gpu = "inf" if value["gpu"] == -1 else str(value["gpu"])
    cpu = "inf" if value["cpu"] == -1 else str(value["cpu"])
    return f"{gpu} / {cpu} / {memory_text}"


def _table(out: io.StringIO, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        out.write(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
        out.write("\n")
