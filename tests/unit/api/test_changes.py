"""A reader of store copies is told exactly which objects changed since its last copy,
whether the copies can say which keys changed (`LoggedObjects`) or not.

The reference is the plain identity comparison of the reader's last copy with this one.
Readers read at their own pace, sometimes an older copy than their last, sometimes a
plain copy; the store is listed again, and its log trimmed, along the way.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from kai.api import changes
from kai.api.changes import ChangeLog, LoggedObjects, StoreChanges
from tests.unit.api.logged_store import LoggedStore, identity_diff


@pytest.mark.parametrize("seed", range(12))
def test_a_reader_is_told_what_changed_since_its_last_copy(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(changes, "_LOG_LIMIT", 40)  # trims happen within a run
    rng = random.Random(seed)
    store = LoggedStore()
    readers: list[tuple[StoreChanges, dict[str, Any]]] = [(StoreChanges(), {}) for _ in range(3)]
    copies: list[LoggedObjects] = [store.copy()]
    for _ in range(400):
        for _ in range(rng.choice((0, 1, 1, 2, 5))):
            key = f"k{rng.randrange(30)}"
            if rng.random() < 0.25:
                store.delete(key)
            else:
                store.put(key, {"key": key})
        if rng.random() < 0.03:
            store.relist()
        copies.append(store.copy())
        for index, (reader, last) in enumerate(readers):
            if rng.random() < 0.4:
                continue
            roll = rng.random()
            objects: dict[str, Any] = (
                dict(copies[-1]) if roll < 0.1  # a plain copy says nothing of what changed
                else rng.choice(copies[-4:]) if roll < 0.2  # an older copy, out of order
                else copies[-1]
            )  # fmt: skip
            changed, gone = reader.since_last(objects)
            assert len(changed) == len(set(changed))
            assert (set(changed), set(gone)) == identity_diff(last, objects)
            readers[index] = (reader, dict(objects))


def test_the_log_says_nothing_about_a_place_a_relist_or_a_trim_passed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(changes, "_LOG_LIMIT", 4)
    log = ChangeLog()
    log.note("a")
    place = log.end
    log.note("b")
    log.note("a")
    assert list(log.since(place) or ()) == ["b", "a"]
    for key in "cde":
        log.note(key)
    assert log.since(place) is None  # trimmed past it
    place = log.end
    log.reset()
    assert log.since(place) is None
    assert log.since(log.end) == set()


def test_a_logged_copy_is_read_only_and_its_copies_claim_nothing() -> None:
    store = LoggedStore()
    store.put("a", {})
    copy = store.copy()
    with pytest.raises(TypeError):
        copy["b"] = {}
    with pytest.raises(TypeError):
        copy.pop("a")
    with pytest.raises(TypeError):
        copy.update({})
    assert type(dict(copy)) is dict
    assert type({**copy}) is dict
