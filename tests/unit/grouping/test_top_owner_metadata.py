"""The top owner's identity annotation is the text `yaml.dump` writes, whatever the names.

The grouper writes it line by line when every value is plain text; the reference here is
PyYAML itself, on names chosen to include the ones YAML reads as other types.
"""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kai.grouping.plan import _top_owner_metadata
from kai.workloads.objects import object_uid

DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # what kai has always dumped it with
TRICKY = [
    "true",
    "No",
    "on",
    "null",
    "~",
    "12",
    "0x1F",
    "1e3",
    "1.5",
    ".inf",
    "2026-12-05",
    "1_000",
    "0o17",
    "1:20",
    "y",
    "-",
    "a b",
    "x:y",
    "#c",
    "",
]
NAMES = st.one_of(
    st.sampled_from(TRICKY),
    st.text(alphabet="abcXYZ019-._", min_size=0, max_size=300),
    st.text(min_size=0, max_size=20),
)


def owner(api_version: str, kind: str, name: str, uid: str) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": name, "uid": uid}}


def reference(api_version: str, kind: str, name: str, uid: str) -> str:
    group, _, version = api_version.rpartition("/")
    uid = object_uid(owner(api_version, kind, name, uid))  # an object without one gets one
    document = {"group": group, "version": version, "kind": kind, "name": name, "uid": uid}
    return yaml.dump(document, Dumper=DUMPER, sort_keys=False)


@settings(max_examples=400)
@given(group=NAMES, version=NAMES, kind=NAMES, name=NAMES, uid=NAMES)
def test_the_annotation_is_what_yaml_writes(
    group: str, version: str, kind: str, name: str, uid: str
) -> None:
    api_version = f"{group}/{version}" if group else version
    if "/" in version or (not group and not version):
        return  # not an apiVersion a Kubernetes object can have
    assert _top_owner_metadata(owner(api_version, kind, name, uid)) == reference(
        api_version, kind, name, uid
    )


def test_a_pod_of_the_core_group_reads_as_kai_writes_it() -> None:
    text = _top_owner_metadata(owner("v1", "Pod", "worker-0", "6b2c-11"))
    assert text == "group: ''\nversion: v1\nkind: Pod\nname: worker-0\nuid: 6b2c-11\n"
