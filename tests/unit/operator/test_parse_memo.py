"""`ParseMemo.kept` hands a result back only for an object that is the very one it was
parsed from alone; every other key is handed out to be parsed, every cycle until it is.

The snapshot test (`test_snapshot_kept`) holds a whole builder to a new one over random
runs; these pin each rule of the contract on its own.
"""

from __future__ import annotations

import functools
from typing import Any

from kai.api.errors import ObjectRef
from kai.operator.parse_memo import ParseMemo
from tests.unit.api.logged_store import LoggedStore

Manifest = dict[str, Any]


def _store(*names: str) -> LoggedStore:
    store = LoggedStore()
    for name in names:
        store.put(name, {"name": name})
    return store


PARSED: list[str] = []


def _parse(key: str) -> str:
    PARSED.append(key)
    return f"parsed {key}"


def _cycle(
    memo: ParseMemo[str],
    store: LoggedStore,
    unless: tuple[str, ...] = (),
    alone: bool = True,
    skip: tuple[str, ...] = (),
) -> tuple[list[str], list[str]]:
    """One cycle as the snapshot builder runs it: kept, then get for the others (but
    `skip`), from the object alone or not; returns (kept, handed out)."""
    objects = store.copy()
    kept, others = memo.kept(objects, unless)
    for key in others:
        if key in skip:
            continue
        obj = objects[key]
        memo.get(key, id(obj), functools.partial(_parse, key), origin=obj if alone else None)
    memo.end_cycle()
    return sorted(kept), sorted(others)


def test_an_unchanged_object_parsed_alone_is_kept() -> None:
    memo: ParseMemo[str] = ParseMemo()
    store = _store("a", "b")
    assert _cycle(memo, store) == ([], ["a", "b"])
    assert _cycle(memo, store) == (["parsed a", "parsed b"], [])
    store.put("b", {"name": "b", "changed": True})
    assert _cycle(memo, store) == (["parsed a"], ["b"])


def test_a_key_overlaid_is_handed_out_and_again_until_parsed_alone() -> None:
    memo: ParseMemo[str] = ParseMemo()
    store = _store("a", "b")
    _cycle(memo, store)
    assert _cycle(memo, store, unless=("a",), alone=False) == (["parsed b"], ["a"])
    # No longer overlaid and unchanged: its result was worked out with the overlay.
    assert _cycle(memo, store) == (["parsed b"], ["a"])
    assert _cycle(memo, store) == (["parsed a", "parsed b"], [])


def test_a_key_left_unparsed_or_in_error_is_handed_out_every_cycle() -> None:
    memo: ParseMemo[str] = ParseMemo()
    store = _store("waiting", "broken")
    objects = store.copy()
    memo.kept(objects)
    error = ObjectRef("Pod", "ns", "broken").error("spec", "bad")

    def fail() -> str:
        raise error

    assert memo.get("broken", 1, fail, origin=objects["broken"]) is error
    memo.end_cycle()
    for _ in range(2):
        assert _cycle(memo, store, skip=("waiting", "broken")) == ([], ["broken", "waiting"])


def test_a_gone_object_is_forgotten_and_a_forgotten_memo_hands_out_everything() -> None:
    memo: ParseMemo[str] = ParseMemo()
    store = _store("a", "b")
    _cycle(memo, store)
    gone = store.objects["a"]
    store.delete("a")
    assert _cycle(memo, store) == (["parsed b"], [])
    memo.forget_kept()
    assert _cycle(memo, store) == ([], ["b"])
    PARSED.clear()
    store.put("a", gone)  # the very object again, under a key the memo forgot
    assert _cycle(memo, store) == (["parsed b"], ["a"])
    assert PARSED == ["a"]


def test_a_forgotten_memo_still_says_which_keys_are_gone() -> None:
    """The snapshot builder tells the engine which objects left (`gone`): forgetting what
    is kept (the priority classes changed) must not forget what was there."""
    memo: ParseMemo[str] = ParseMemo()
    store = _store("a", "b")
    _cycle(memo, store)
    memo.forget_kept()
    store.delete("a")
    kept, handed = memo.kept(store.copy())
    assert (kept, handed, memo.gone) == ([], ["b"], ["a"])
