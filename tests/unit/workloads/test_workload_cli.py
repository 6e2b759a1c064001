"""`kai workload` commands that need no cluster: validate exit codes, describe -f documents."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
import yaml

from kai.cli import workload
from kai.workloads.catalog import load_catalog
from kai.workloads.jqeval import JqEvaluator

FIXTURES = Path(__file__).parents[2] / "fixtures" / "workloads"


def run(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    workload.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["workload", *argv])
    code: int = args.handler(args)
    return code


def test_validate_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    valid = next(d for d in load_catalog(JqEvaluator()) if d.name == "kubeflow-org-pytorchjob-v1")
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump(valid.document))
    assert run("validate", str(good)) == 0
    assert "OK:" in capsys.readouterr().out
    broken = dict(valid.document)
    broken["spec"] = {**broken["spec"], "structureDefinition": {"rootComponent": {"name": "x"}}}
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(broken))
    assert run("validate", str(bad)) == 1
    out = capsys.readouterr().out
    assert "INVALID:" in out and "spec.structureDefinition.rootComponent.kind: is required" in out
    garbage = tmp_path / "garbage.yaml"
    garbage.write_text("a: [unclosed")
    assert run("validate", str(garbage)) == 2
    assert run("validate", str(tmp_path / "missing.yaml")) == 2


def test_describe_file_json_matches_the_contract(capsys: pytest.CaptureFixture[str]) -> None:
    assert run("describe", "-f", str(FIXTURES / "jobset.yaml"), "-o", "json") == 0
    document = json.loads(capsys.readouterr().out)
    assert document["definition"] == "jobset-x-k8s-io-jobset-v1alpha2"
    assert [(c["name"], c["replicas"], c["pods"]) for c in document["components"]] == [
        ("leader", 1, 1),
        ("workers", 2, 2),
    ]
    assert document["podGroup"]["minMember"] == 3


def test_describe_unknown_type_emits_the_error_document(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    widget = tmp_path / "widget.yaml"
    widget.write_text("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n")
    assert run("describe", "-f", str(widget), "-o", "yaml") == 1
    document = yaml.safe_load(capsys.readouterr().out)
    assert document["error"] == "no_definition_for_type"
    assert (document["kind"], document["apiVersion"]) == ("Widget", "example.com/v1")
