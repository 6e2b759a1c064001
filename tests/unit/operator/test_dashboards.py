"""The Grafana dashboards query only what kai's /metrics exports, with the labels it has.

A dashboard is only checked by a person looking at it in Grafana, and a panel whose
metric was renamed, or never existed, shows "No data" rather than an error. So every
PromQL expression of every panel and every template variable is read here, the
metric and label names it uses are picked out, and each is looked up in a real scrape:
`HealthServer` serving a real `Metrics()` over HTTP, fed through the same recording
methods the scheduling loop calls, parsed with prometheus_client's parser.

A metric counts as exported only in the form Prometheus stores it: a gauge by its
name, a counter as `_total`, a histogram as `_bucket`, `_sum` and `_count` (a bare
histogram name, or a counter without `_total`, matches no series). A label a panel
filters or groups by must be on every metric it applies to; `instance` and `job`
are allowed too, since Prometheus adds them to every scraped series (they tell the
replicas apart). The reader is a small tokenizer, not a PromQL parser: a construct
it does not understand (`on`, `offset`, an unknown function) fails the test rather
than being skipped, so a dashboard cannot slip past it.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from kai.engine.fairshare import QueueShare
from kai.engine.group_decision import GroupDecision
from kai.engine.resources import Resources
from kai.operator.metrics import Metrics
from kai.operator.server import HealthServer

DASHBOARDS = Path(__file__).parents[3] / "charts" / "kai-scheduler" / "dashboards"
SCRAPE_LABELS = frozenset({"instance", "job"})
"""Labels Prometheus puts on every series it scrapes, whatever the target exports."""

AGGREGATIONS = frozenset(
    {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values"}
    | {"bottomk", "topk", "quantile", "limitk", "limit_ratio"}
)
FUNCTIONS = frozenset(
    {"abs", "absent", "absent_over_time", "avg_over_time", "ceil", "changes", "clamp"}
    | {"clamp_max", "clamp_min", "count_over_time", "delta", "deriv", "exp", "floor"}
    | {"histogram_quantile", "idelta", "increase", "irate", "last_over_time", "ln", "log2"}
    | {"log10", "max_over_time", "min_over_time", "predict_linear", "present_over_time"}
    | {"quantile_over_time", "rate", "resets", "round", "scalar", "sgn", "sort", "sort_desc"}
    | {"sqrt", "stddev_over_time", "stdvar_over_time", "sum_over_time", "time", "timestamp"}
    | {"vector"}
)
IGNORED_WORDS = frozenset({"and", "or", "unless", "bool", "inf", "nan"})
UNSUPPORTED_WORDS = frozenset({"on", "ignoring", "group_left", "group_right", "offset"})
MATCH_OPERATORS = frozenset({"=", "!=", "=~", "!~"})

_TOKEN = re.compile(
    r"""
    (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
    |(?P<range>\[[^\]]*\])
    |(?P<duration>(?:\d+(?:ms|[smhdwy]))+(?![\w:]))
    |(?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
    |(?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
    |(?P<punct>[(){},@])
    |(?P<op>=~|!~|!=|==|>=|<=|[-+*/%^<>=])
    |(?P<space>\s+)
    """,
    re.VERBOSE,
)
_LABEL_VALUES = re.compile(r"^\s*label_values\((?P<expr>.*),\s*(?P<label>[A-Za-z_]\w*)\s*\)\s*$")


class PromQLError(ValueError):
    """An expression the tokenizer does not understand."""


@dataclass(frozen=True)
class Token:
    kind: str
    text: str


@dataclass
class Reading:
    """What one expression uses: each selector's metric and the labels it matches on,
    and each grouping's labels with the metrics they are taken from."""

    selectors: list[tuple[str, frozenset[str]]] = field(default_factory=list)
    groupings: list[tuple[frozenset[str], frozenset[str]]] = field(default_factory=list)

    @property
    def metrics(self) -> set[str]:
        return {metric for metric, _ in self.selectors}


def tokens(expr: str) -> list[Token]:
    found: list[Token] = []
    at = 0
    while at < len(expr):
        match = _TOKEN.match(expr, at)
        if match is None:
            raise PromQLError(f"cannot read {expr[at:]!r} in {expr!r}")
        kind = match.lastgroup or ""
        if kind != "space":
            found.append(Token(kind, match.group()))
        at = match.end()
    return found


def _closing(found: list[Token], opening: int) -> int:
    """The index of the bracket that closes the one at `opening`."""
    pair = {"(": ")", "{": "}"}[found[opening].text]
    depth = 0
    for index in range(opening, len(found)):
        if found[index].text == found[opening].text:
            depth += 1
        elif found[index].text == pair:
            depth -= 1
            if depth == 0:
                return index
    raise PromQLError(f"unclosed {found[opening].text!r}")


def _label_list(found: list[Token], opening: int) -> tuple[frozenset[str], int]:
    """The label names of `by (...)`/`without (...)` whose `(` is at `opening`, and the
    index after its `)`."""
    if opening >= len(found) or found[opening].text != "(":
        raise PromQLError("by/without without a label list")
    closing = _closing(found, opening)
    labels = [t.text for t in found[opening + 1 : closing] if t.text != ","]
    if any(not re.fullmatch(r"[A-Za-z_]\w*", label) for label in labels):
        raise PromQLError(f"not a label list: {labels}")
    return frozenset(labels), closing + 1


def read(expr: str) -> Reading:
    """The metric and label names `expr` uses (see the module docstring for what it refuses)."""
    found = tokens(expr)
    reading = Reading()
    selector_at: dict[int, str] = {}  # token index of each selector's metric -> metric
    scopes: list[tuple[frozenset[str], int, int]] = []  # grouping labels, argument span
    skip: set[int] = set()
    for index, token in enumerate(found):
        if index in skip or token.kind != "ident":
            if index not in skip and token.text in ("{", "@"):
                raise PromQLError(f"{token.text!r} without a metric name before it in {expr!r}")
            continue
        word = token.text
        following = found[index + 1].text if index + 1 < len(found) else ""
        if word in AGGREGATIONS and following in ("(", "by", "without"):
            labels: frozenset[str] = frozenset()
            argument = index + 1
            if following in ("by", "without"):
                labels, argument = _label_list(found, index + 2)
                skip.update(range(index + 1, argument))
            end = _closing(found, argument)
            if end + 1 < len(found) and found[end + 1].text in ("by", "without"):
                after, stop = _label_list(found, end + 2)
                labels |= after
                skip.update(range(end + 1, stop))
            scopes.append((labels, argument, end))
        elif following == "(":
            if word not in FUNCTIONS:
                raise PromQLError(f"unknown function {word!r} in {expr!r}")
        elif word in UNSUPPORTED_WORDS or word in ("by", "without"):
            raise PromQLError(f"{word!r} is not understood here (extend this test): {expr!r}")
        elif word not in IGNORED_WORDS:
            matched: set[str] = set()
            if following == "{":
                closing = _closing(found, index + 1)
                inside = found[index + 2 : closing]
                for at in range(0, len(inside), 4):  # label, operator, "value", [","]
                    matcher = inside[at : at + 3]
                    if (
                        len(matcher) < 3
                        or matcher[0].kind != "ident"
                        or matcher[1].text not in MATCH_OPERATORS
                        or matcher[2].kind != "string"
                    ):
                        raise PromQLError(f"cannot read the matchers of {word} in {expr!r}")
                    matched.add(matcher[0].text)
                skip.update(range(index + 1, closing + 1))
            selector_at[index] = word
            reading.selectors.append((word, frozenset(matched)))
    for labels, start, end in scopes:
        selectors = frozenset(m for at, m in selector_at.items() if start < at < end)
        reading.groupings.append((labels, selectors))
    return reading


def read_variable(query: str) -> Reading:
    """A template variable's query: `label_values(EXPR, LABEL)` or plain PromQL."""
    match = _LABEL_VALUES.match(query)
    if match is None:
        return read(query)
    reading = read(match["expr"])
    reading.groupings.append((frozenset({match["label"]}), frozenset(reading.metrics)))
    return reading


@dataclass(frozen=True)
class Exported:
    """The series names a scrape holds, each with the label names its samples carry."""

    labels: dict[str, frozenset[str]]


def exported_from(text: str) -> Exported:
    suffixes = {"gauge": ("",), "counter": ("_total",), "histogram": ("_bucket", "_sum", "_count")}
    labels: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for suffix in suffixes.get(family.type, ()):
            labels[family.name + suffix] = set()
        for sample in family.samples:
            if sample.name in labels:
                labels[sample.name].update(sample.labels)
    return Exported({name: frozenset(names) for name, names in labels.items()})


def problems(reading: Reading, exported: Exported) -> list[str]:
    """What in one expression names a series or a label the scrape does not have."""
    found: list[str] = []
    for metric, matched in reading.selectors:
        if metric not in exported.labels:
            found.append(f"{metric}: not exported")
            continue
        for label in sorted(matched - exported.labels[metric] - SCRAPE_LABELS):
            found.append(f"{metric}: no label {label!r}")
    for grouped, metrics in reading.groupings:
        for metric in sorted(metrics & exported.labels.keys()):
            for label in sorted(grouped - exported.labels[metric] - SCRAPE_LABELS):
                found.append(f"{metric}: no label {label!r} to group by")
    return found


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels") or [])  # a collapsed row keeps its panels


def expressions(dashboard: dict[str, Any]) -> Iterator[tuple[str, Reading]]:
    """(where, what it uses) for every panel target and every query variable."""
    for panel in _panels(dashboard.get("panels") or []):
        for target in panel.get("targets") or []:
            yield f"panel {panel['title']!r} {target['refId']}", read(target["expr"])
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]
            text = query["query"] if isinstance(query, dict) else query
            yield f"variable {variable['name']!r}", read_variable(text)


def _dashboards() -> list[Path]:
    return sorted(DASHBOARDS.glob("*.json"))


def _load(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def _share(gpus: int) -> QueueShare:
    amount = Resources.of(Fraction(gpus), 0, 0)
    return QueueShare(amount, amount, amount, amount, amount, amount)


def _record_a_cycle(metrics: Metrics) -> None:
    """What the loop records after a cycle (`SchedulingLoop._record`, `_bind`, `_evict`),
    so every labelled metric has a series whose labels the scrape shows."""
    metrics.leading(True)
    metrics.record_cycle({"group": 0.002, "allocate": 0.040, "bind": 0.010}, 0.06, 1, 0)
    metrics.record_binds(bound=3, failed=1, unknown=0)
    metrics.record_queues({"team-a": _share(4), "team-b": _share(2)})
    waiting = GroupDecision("ml/train", "team-a", False, "OverLimit", "limit 4 GPUs")
    metrics.record_pending({waiting.key: waiting})
    metrics.evicted("serve", "ml")


async def _scrape() -> str:
    metrics = Metrics()
    _record_a_cycle(metrics)
    server = HealthServer(metrics, None, lambda: True, "127.0.0.1", 0)
    await server.start()
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{server.port}/metrics") as response,
        ):
            assert response.status == 200
            return await response.text()
    finally:
        await server.stop()


@pytest.fixture(scope="module")
def exported() -> Exported:
    return exported_from(asyncio.run(_scrape()))


def test_the_dashboards_are_there() -> None:
    names = [path.name for path in _dashboards()]
    assert "kai-queues.json" in names and "kai-scheduler.json" in names


@pytest.mark.parametrize("path", _dashboards(), ids=lambda path: path.name)
def test_every_metric_and_label_a_dashboard_queries_is_exported(
    path: Path, exported: Exported
) -> None:
    found = [
        f"{where}: {problem}"
        for where, reading in expressions(_load(path))
        for problem in problems(reading, exported)
    ]
    assert found == []


@pytest.mark.parametrize("path", _dashboards(), ids=lambda path: path.name)
def test_every_query_goes_to_the_chosen_datasource(path: Path) -> None:
    """Grafana's sidecar loads the files as they are (no import step fills `${DS_...}`
    inputs), so each panel and query variable must use the `datasource` variable."""
    dashboard = _load(path)
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    chosen = {"type": "prometheus", "uid": "${datasource}"}
    queried = [p for p in _panels(dashboard["panels"]) if p.get("targets")]
    assert queried
    for panel in queried:
        assert panel["datasource"] == chosen, panel["title"]
        assert all(target["datasource"] == chosen for target in panel["targets"]), panel["title"]
    for variable in variables.values():
        if variable["type"] == "query":
            assert variable["datasource"] == chosen, variable["name"]


def test_uids_panel_ids_and_ref_ids_are_unique() -> None:
    """Grafana keeps one dashboard per uid (a duplicate silently replaces the other), and
    panel ids and a panel's refIds address panels and queries within a dashboard."""
    uids = [_load(path)["uid"] for path in _dashboards()]
    assert len(uids) == len(set(uids))
    for path in _dashboards():
        panels = list(_panels(_load(path)["panels"]))
        ids = [panel["id"] for panel in panels]
        assert len(ids) == len(set(ids)), path.name
        for panel in panels:
            refs = [target["refId"] for target in panel.get("targets") or []]
            assert len(refs) == len(set(refs)), panel["title"]


def test_the_queue_variable_filters_every_queue_series(exported: Exported) -> None:
    """Choosing queues narrows every panel of a dashboard that has the `queue` variable,
    and the variable lists the queues kai reports."""
    with_queue = [d for d in map(_load, _dashboards()) if _has_variable(d, "queue")]
    assert with_queue
    for dashboard in with_queue:
        for panel in _panels(dashboard["panels"]):
            for target in panel.get("targets") or []:
                for metric, matched in read(target["expr"]).selectors:
                    if "queue_name" in exported.labels.get(metric, ()):
                        assert "queue_name" in matched, (panel["title"], metric)
                        assert 'queue_name=~"$queue"' in target["expr"], panel["title"]


def _has_variable(dashboard: dict[str, Any], name: str) -> bool:
    return any(v["name"] == name for v in dashboard["templating"]["list"])


def test_the_panels_issue_11_asks_for_are_there() -> None:
    """Queue fair share vs allocated vs deserved, pending groups by reason, cycle latency
    per action as histogram quantiles, binds and evictions per second, and health."""
    used: dict[str, set[str]] = {}
    for path in _dashboards():
        for panel in _panels(_load(path)["panels"]):
            for target in panel.get("targets") or []:
                used.setdefault(panel["title"], set()).add(target["expr"])
    every = "\n".join(expr for exprs in used.values() for expr in exprs)

    def panel_with(*needles: str) -> bool:
        return any(all(n in "\n".join(exprs) for n in needles) for exprs in used.values())

    assert panel_with("queue_fair_share_gpu", "queue_allocated_gpus", "queue_deserved_gpus")
    assert panel_with("sum by (reason) (kai_pending_pod_groups")
    assert panel_with("histogram_quantile(", "by (le, action)", "action_scheduling_latency")
    assert panel_with("rate(kai_binds_total")
    assert panel_with("rate(pod_group_evicted_pods_total")
    for health in (
        "kai_cycles_total",
        "kai_scheduler_cycle_failures_total",
        "kai_scheduler_consecutive_failed_cycles",
        "kai_leader",
        "kai_cache_relists",
    ):
        assert health in every


# The reader and the check themselves: each mistake a dashboard could make is caught.


def test_the_reader_tells_metrics_from_functions_keywords_and_labels() -> None:
    reading = read(
        'histogram_quantile(0.99, sum by (le, action) (rate(action_scheduling_latency_milliseconds_bucket{action=~"$action", instance=~"$instance"}[$__rate_interval]))) / 1000'
    )
    assert reading.selectors == [
        ("action_scheduling_latency_milliseconds_bucket", frozenset({"action", "instance"}))
    ]
    assert reading.groupings == [
        (frozenset({"le", "action"}), frozenset({"action_scheduling_latency_milliseconds_bucket"}))
    ]
    reading = read("max(a) by (queue_name) / clamp_min(b > bool 0, 1) and c unless d")
    assert reading.metrics == {"a", "b", "c", "d"}
    assert reading.groupings == [(frozenset({"queue_name"}), frozenset({"a"}))]
    reading = read_variable('label_values(queue_allocated_gpus{queue_name!="x"}, queue_name)')
    assert reading.selectors == [("queue_allocated_gpus", frozenset({"queue_name"}))]
    assert reading.groupings == [(frozenset({"queue_name"}), frozenset({"queue_allocated_gpus"}))]


@pytest.mark.parametrize(
    "expr",
    [
        "rates(kai_cycles_total[5m])",  # a misspelt function is not a metric
        "a * on (instance) b",
        "a offset 5m",
        '{__name__="kai_leader"}',
        "sum by queue_name (a)",
        "a{queue_name}",
        "a $queue",
    ],
)
def test_what_the_reader_does_not_understand_fails(expr: str) -> None:
    with pytest.raises(PromQLError):
        read(expr)


@pytest.mark.parametrize(
    ("expr", "problem"),
    [
        ("rate(kai_no_such_metric_total[5m])", "kai_no_such_metric_total: not exported"),
        ("rate(kai_binds[5m])", "kai_binds: not exported"),  # a counter without _total
        ("e2e_scheduling_latency_milliseconds", "e2e_scheduling_latency_milliseconds: not"),
        ('queue_allocated_gpus{queue="a"}', "queue_allocated_gpus: no label 'queue'"),
        ("sum by (queue) (queue_allocated_gpus)", "no label 'queue' to group by"),
        ("sum by (le) (rate(kai_binds_total[5m]))", "kai_binds_total: no label 'le'"),
        ("sum by (pod) (kai_leader)", "kai_leader: no label 'pod' to group by"),
    ],
)
def test_a_name_kai_does_not_export_is_reported(
    expr: str, problem: str, exported: Exported
) -> None:
    found = problems(read(expr), exported)
    assert any(problem in line for line in found), found


def test_the_scrape_has_every_metric_with_its_labels(exported: Exported) -> None:
    """The check is only as good as the scrape: the labelled metrics have series."""
    assert exported.labels["kai_pending_pod_groups"] == {"queue_name", "reason"}
    assert exported.labels["action_scheduling_latency_milliseconds_bucket"] == {"action", "le"}
    assert exported.labels["kai_binds_total"] == {"result"}
    assert exported.labels["pod_group_evicted_pods_total"] == {"pod_group", "namespace"}
    assert exported.labels["queue_fair_share_gpu"] == {"queue_name"}
    assert "kai_cycles_total" in exported.labels and "kai_cycles" not in exported.labels
