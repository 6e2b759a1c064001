"""`kai workload` commands that need no cluster: validate exit codes, describe -f documents."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import pytest
import yaml

from kai.cli import workload
from kai.cli.workload_live import version_priority
from kai.workloads.catalog import load_catalog
from kai.workloads.jqeval import JqEvaluator
from kai.workloads.loader import load_definition
from tests.unit.workloads.upstream_material import definition_document

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


LIVE = FIXTURES / "live"


def test_describe_reads_the_manifest_from_stdin(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO((FIXTURES / "jobset.yaml").read_text()))
    assert run("describe", "-f", "-", "-o", "json") == 0
    assert json.loads(capsys.readouterr().out)["podGroup"]["minMember"] == 3


def test_describe_reads_one_workload(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stream = tmp_path / "two.yaml"
    stream.write_text(
        (FIXTURES / "job.yaml").read_text() + "\n---\n" + (FIXTURES / "pod.yaml").read_text()
    )
    assert run("describe", "-f", str(stream)) == 2
    assert "holds 2 documents" in capsys.readouterr().err


def test_a_definition_file_describes_a_type_nothing_else_covers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    trainer = str(LIVE / "trainer.yaml")
    assert run("describe", "-f", trainer, "-o", "json") == 1  # the contract's no-definition code
    assert json.loads(capsys.readouterr().out)["error"] == "no_definition_for_type"
    definition = str(LIVE / "trainer-definition.yaml")
    assert run("describe", "-f", trainer, "--definition", definition, "-o", "json") == 0
    document = json.loads(capsys.readouterr().out)
    assert (document["definition"], document["origin"]) == ("example-com-trainer-v1", "file")
    assert document["resources"]["gpus"] == 4


def test_a_definition_file_overrides_the_catalog(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = next(d for d in load_catalog(JqEvaluator()) if d.name == "batch-job-v1").document
    mine = {**job, "metadata": {"name": "my-jobs"}}
    mine["spec"] = {**job["spec"], "optimizationInstructions": {}}
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(mine))
    assert (
        run("describe", "-f", str(FIXTURES / "job.yaml"), "--definition", str(path), "-o", "json")
        == 0
    )
    document = json.loads(capsys.readouterr().out)
    assert (document["definition"], document["origin"]) == ("my-jobs", "file")


def test_a_bad_definition_file_is_not_replaced_by_the_catalog(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = str(FIXTURES / "job.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("apiVersion: run.ai/v1alpha1\nkind: Karta\nmetadata: {name: x}\nspec: {}\n")
    assert run("describe", "-f", job, "--definition", str(broken)) == 1
    assert "spec.structureDefinition: is required" in capsys.readouterr().err
    assert run("describe", "-f", job, "--definition", str(tmp_path / "absent.yaml")) == 2


@pytest.mark.parametrize(
    "argv",
    [
        ["get"],
        ["get", "--all-types", "job"],
        ["get", "job/train", "-l", "team=a"],
        ["get", "job/train", "other"],
        ["get", "job/"],
        ["describe"],
        ["describe", "job"],
        ["describe", "job/train", "-f", "job.yaml"],
        ["definitions", "--kind", "Job"],
        ["definitions", "--group", "batch", "--version", "v1"],
        ["definitions", "batch-job-v1", "--group", "batch"],
    ],
)
def test_arguments_that_do_not_go_together_exit_2_before_any_cluster_is_read(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(*argv) == 2
    assert capsys.readouterr().err.startswith("ERROR: ")


def test_an_unreachable_cluster_is_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = str(tmp_path / "absent")
    assert run("get", "job", "--kubeconfig", kubeconfig) == 1
    assert "cannot read the cluster" in capsys.readouterr().err
    assert run("describe", "job/train", "--kubeconfig", kubeconfig) == 1


def definitions(*argv: str, tmp_path: Path) -> int:
    return run("definitions", *argv, "--kubeconfig", str(tmp_path / "absent"))


def test_definitions_filter_by_group_kind_and_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def names(*argv: str) -> list[str]:
        assert definitions(*argv, "-o", "json", tmp_path=tmp_path) == 0
        return [d["metadata"]["name"] for d in json.loads(capsys.readouterr().out)["items"]]

    assert names("--group", "batch") == ["batch-cronjob-v1", "batch-job-v1"]
    assert names("--group", "batch", "--kind", "job") == ["batch-job-v1"]
    assert names("--group", "", "--kind", "Pod", "--version", "v1") == ["core-pod-v1"]
    assert names("--group", "core") == ["core-pod-v1"]
    assert definitions("--group", "example.com", tmp_path=tmp_path) == 1
    assert "using the built-in catalog only" in capsys.readouterr().err


def test_definitions_yaml_is_apply_ready_and_validates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert definitions("-o", "yaml", tmp_path=tmp_path) == 0
    stream = capsys.readouterr().out
    documents = list(yaml.safe_load_all(stream))
    assert len(documents) == len(load_catalog(JqEvaluator()))
    for document in documents:
        assert set(document) == {"apiVersion", "kind", "metadata", "spec"}
        root = document["spec"]["structureDefinition"]["rootComponent"]["kind"]
        labels = document["metadata"]["labels"]
        assert (labels["run.ai/karta-version"], labels["run.ai/karta-kind"]) == (
            root["version"],
            root["kind"],
        )
    monkeypatch.setattr("sys.stdin", io.StringIO(stream))
    assert run("validate", "-") == 0
    assert capsys.readouterr().out.count("OK: - is a valid Karta definition") == len(documents)


def test_one_definition_is_emitted_on_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert definitions("batch-job-v1", "-o", "json", tmp_path=tmp_path) == 0
    document = json.loads(capsys.readouterr().out)
    assert (document["kind"], document["metadata"]["name"]) == ("Karta", "batch-job-v1")
    assert definitions("batch-job-v1", "-o", "yaml", tmp_path=tmp_path) == 0
    assert yaml.safe_load(capsys.readouterr().out) == document


def test_definitions_table_lists_the_root_and_a_limited_number_of_children(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    milvus = next(d for d in load_catalog(JqEvaluator()) if d.name == "milvus-io-milvus-v1beta1")
    children = len(milvus.children)
    assert definitions("--group", "milvus.io", tmp_path=tmp_path) == 0
    row = capsys.readouterr().out.splitlines()[1]
    assert row.endswith(f", +{children - 3} more")
    assert definitions("--group", "milvus.io", "--component-limit", "0", tmp_path=tmp_path) == 0
    row = capsys.readouterr().out.splitlines()[1]
    assert "more" not in row and row.endswith(milvus.children[-1].name)


def test_a_cluster_copy_of_a_definition_is_applied_without_what_the_server_added() -> None:
    jq = JqEvaluator()
    job = next(d for d in load_catalog(jq) if d.name == "batch-job-v1").document
    served = {
        **job,
        "metadata": {
            "name": "batch-job-v1",
            "uid": "1234",
            "resourceVersion": "77",
            "managedFields": [{"manager": "kubectl"}],
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}", "a": "b"},
        },
        "status": {"conditions": []},
    }
    document = workload.apply_ready(load_definition(served, jq, "cluster"))
    assert document["metadata"] == {
        "name": "batch-job-v1",
        "labels": {
            "run.ai/karta-group": "batch",
            "run.ai/karta-version": "v1",
            "run.ai/karta-kind": "Job",
        },
        "annotations": {"a": "b"},
    }
    assert "status" not in document and document["spec"] == job["spec"]


def test_the_most_stable_version_sorts_first() -> None:
    """How a kind defined at several versions is listed by `get --all-types`."""
    versions = ["v1alpha1", "v1", "v1beta2", "v2", "v1beta1", "v2alpha1", "preview"]
    assert sorted(versions, key=version_priority) == [
        "v2",
        "v1",
        "v1beta2",
        "v1beta1",
        "v2alpha1",
        "v1alpha1",
        "preview",
    ]


def test_validate_names_the_keys_upstream_dropped_but_accepts_the_definition(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = definition_document("apps-deployment-v1")
    status = document["spec"]["structureDefinition"]["rootComponent"]["statusDefinition"]
    status["statusMappings"]["pending"] = [
        {"byConditions": [{"type": "Available", "status": "False"}]}
    ]
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump(document))
    assert run("validate", str(path)) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"OK: {path} is a valid Karta definition")
    assert "warning: spec.structureDefinition.rootComponent.statusDefinition" in out
    assert "statusMappings.pending" in out
