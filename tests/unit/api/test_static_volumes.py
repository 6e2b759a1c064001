"""Claims that take volumes made beforehand (`kai.api.static_volumes`): what they ask of a
node, what a node offers, which volumes count as free, and that the scalar check says yes
exactly when each claim can have a volume of its own."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kai.api.node_offers import offering, volume_offers
from kai.api.pods import parse_pod
from kai.api.static_volumes import Pool, StaticClaim, StaticVolumes, choose
from kai.api.volumes import VolumeObjects, pod_claims, with_claims
from kai.engine.eligibility import node_accepts
from kai.engine.model import Requirement
from kai.engine.scalars import MILLI, shortage
from tests.unit.api.volume_manifests import (
    claim,
    claim_volume,
    claimant,
    local_disk,
    storage_class,
)
from tests.unit.engine.builders import node

GI = 1024**3
LOCAL = Pool("local", "Filesystem")


def _objects(*manifests: dict[str, Any]) -> VolumeObjects:
    classes = {
        "local": storage_class("local", "WaitForFirstConsumer", "kubernetes.io/no-provisioner")
    }
    claims = {
        f"ml/{m['metadata']['name']}": m for m in manifests if m["kind"] != "PersistentVolume"
    }
    volumes = {m["metadata"]["name"]: m for m in manifests if m["kind"] == "PersistentVolume"}
    return VolumeObjects(claims, volumes, classes)


def _local_claim(name: str, size: str, **spec: Any) -> dict[str, Any]:
    return claim(
        name,
        storageClassName="local",
        accessModes=["ReadWriteOnce"],
        resources={"requests": {"storage": size}},
        **spec,
    )


def _host(name: str) -> Any:
    return node(name, labels={"kubernetes.io/hostname": name})


DISKS = (
    local_disk("a1", "node-a", "100Gi"),
    local_disk("a2", "node-a", "100Gi"),
    local_disk("b1", "node-b", "1Ti"),
)


def test_a_claim_asks_one_volume_of_each_size_up_to_the_smallest_that_holds_it() -> None:
    objects = _objects(*DISKS, _local_claim("small", "50Gi"), _local_claim("big", "500Gi"))
    small = pod_claims(claimant(claim_volume("small")), objects)
    big = pod_claims(claimant(claim_volume("big")), objects)
    assert small.wait is None and small.asks == (("volume/local/Filesystem/100Gi+", MILLI),)
    assert big.asks == (
        ("volume/local/Filesystem/100Gi+", MILLI),
        ("volume/local/Filesystem/1Ti+", MILLI),
    )
    assert big.static == (StaticClaim("ml/big", "", LOCAL, 500 * GI),)
    both = pod_claims(claimant(claim_volume("small"), claim_volume("big")), objects)
    assert dict(both.asks) == {
        "volume/local/Filesystem/100Gi+": 2 * MILLI,
        "volume/local/Filesystem/1Ti+": MILLI,
    }


def test_each_node_offers_its_free_volumes_of_each_size() -> None:
    objects = _objects(*DISKS, _local_claim("big", "500Gi"))
    pod = with_claims(
        parse_pod(claimant(claim_volume("big")), "ml/g"),
        pod_claims(claimant(claim_volume("big")), objects),
    )
    hosts = [_host("node-a"), _host("node-b"), _host("node-c")]
    offers = volume_offers([pod], hosts, objects)
    assert offers == {
        "node-a": (("volume/local/Filesystem/100Gi+", 2 * MILLI),),
        "node-b": (
            ("volume/local/Filesystem/100Gi+", MILLI),
            ("volume/local/Filesystem/1Ti+", MILLI),
        ),
    }
    free = {
        name: dict(offering(n, frozenset(), offers.get(name, ())).scalars)
        for n in hosts
        for name in [n.name]
    }
    assert shortage(pod.scalars, free["node-b"]) is None
    assert shortage(pod.scalars, free["node-a"]) == ("volume/local/Filesystem/1Ti+", MILLI, 0)
    assert shortage(pod.scalars, free["node-c"]) is not None


def test_volumes_that_are_not_free_are_not_offered() -> None:
    taken = [
        local_disk("named", "node-a", "100Gi", claimRef={"namespace": "ml", "name": "other"}),
        {**local_disk("bound", "node-a", "100Gi"), "status": {"phase": "Bound"}},
        {
            **local_disk("going", "node-a", "100Gi"),
            "metadata": {"name": "going", "deletionTimestamp": "2026-12-07T00:00:00Z"},
        },
        local_disk("claimed", "node-a", "100Gi"),
        local_disk("wide", "node-a", "100Gi", nodeAffinity=None),
        local_disk("other-class", "node-a", "100Gi", storageClassName="fast"),
    ]
    objects = _objects(*taken, _local_claim("user", "1Gi", volumeName="claimed"))
    static = objects.static
    assert static.free == {}
    assert set(static.naming) == {"ml/other"}


def test_a_volume_naming_the_claim_holds_the_pod_to_its_node_and_asks_nothing() -> None:
    mine = local_disk(
        "c1", "node-c", "100Gi", claimRef={"namespace": "ml", "name": "kept", "uid": "k1"}
    )
    kept = _local_claim("kept", "50Gi")
    kept["metadata"]["uid"] = "k1"
    reading = pod_claims(claimant(claim_volume("kept")), _objects(*DISKS, mine, kept))
    assert reading.asks == () and reading.static == () and reading.wait is None
    assert reading.terms == (((Requirement("kubernetes.io/hostname", "In", ("node-c",)),),),)
    pod = with_claims(parse_pod(claimant(claim_volume("kept")), "ml/g"), reading)
    assert node_accepts(_host("node-c"), pod.placement)
    assert not node_accepts(_host("node-a"), pod.placement)
    # A volume that names an earlier claim of the same name (another uid) is not this one's.
    kept["metadata"]["uid"] = "k2"
    again = pod_claims(claimant(claim_volume("kept")), _objects(*DISKS, mine, kept))
    assert again.terms == () and again.asks == (("volume/local/Filesystem/100Gi+", MILLI),)


def test_a_volume_whose_host_is_two_nodes_is_offered_on_neither() -> None:
    twins = [
        node("n1", labels={"kubernetes.io/hostname": "node-a"}),
        node("n2", labels={"kubernetes.io/hostname": "node-a"}),
    ]
    assert _objects(*DISKS).static.by_node(twins) == {}


_Sizes = st.lists(st.integers(1, 6), max_size=6)


@settings(max_examples=400, deadline=None)
@given(volumes=_Sizes, claims=_Sizes, elsewhere=_Sizes)
def test_the_scalars_fit_exactly_when_every_claim_can_have_its_ownlocal_disk(
    volumes: list[int], claims: list[int], elsewhere: list[int]
) -> None:
    """On one node, the claims' asks fit its offers if and only if a matching gives each
    claim its own volume that holds it (checked by trying every assignment), and then the
    binder's `choose` finds one. Volumes on another node add sizes to the pool."""
    manifests = [local_disk(f"v{i}", "node-a", f"{size}Gi") for i, size in enumerate(volumes)]
    manifests += [local_disk(f"w{i}", "node-b", f"{size}Gi") for i, size in enumerate(elsewhere)]
    static = StaticVolumes({m["metadata"]["name"]: m for m in manifests}, {"local"}, set())
    wanted = [StaticClaim(f"ml/c{i}", "", LOCAL, size * GI) for i, size in enumerate(claims)]
    asks: dict[str, int] = {}
    for one in wanted:
        asked = static.asks(one, ["ReadWriteOnce"])
        if isinstance(asked, str):  # no volume of the cluster holds it
            assert all(size < one.request // GI for size in volumes + elsewhere)
            return
        for name, amount in asked:
            asks[name] = asks.get(name, 0) + amount
    here = static.by_node([_host("node-a"), _host("node-b")]).get("node-a", [])
    offered = static.offers([_host("node-a")], frozenset(asks)).get("node-a", ())
    fits = shortage(tuple(sorted(asks.items())), dict(offered)) is None
    matching = (
        any(
            all(volumes[v] >= size for v, size in zip(order, claims, strict=False))
            for order in itertools.permutations(range(len(volumes)), len(claims))
        )
        if len(claims) <= len(volumes)
        else False
    )
    assert fits == matching
    chosen = choose(wanted, here, set())
    assert (chosen is not None) == matching
    if chosen is not None:
        assert len({v.name for v in chosen.values()}) == len(wanted)
        assert all(chosen[c.key].capacity >= c.request for c in wanted)
