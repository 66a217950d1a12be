"""A copy of a message keeps its own values' types (meta, extra, a part's or a call's) when it takes a redaction.

``1``, ``True`` and ``1.0`` compare equal, so two messages equal but for their ids and the type of one value were
copies to the ledger (``SameMessage``): the second took the first's redaction, and with it the first's value
(``{"flag": 1}`` archived as ``{"flag": true}``); the same through a part's data or extra and a call's extra,
whose content the copy took whole. Copies are now equal value for value and type for type.
"""
import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.manager import ContextManager
from contextfold.messages import Message, TextPart, ToolCall, UnknownPart
from contextfold.redact import Redactor

SECRET = "Hu2nt3er9Xy7Qz4Lm8Pw-k18types"
TEXT = f"export password={SECRET} done"
PAIRS = [(True, 1), (1, True), (1, 1.0), (1.0, True), (0.0, -0.0), ((1,), (True,)), ({"k": 1}, {"k": True}),
         ({"k": 1, "j": 2}, {"j": 2, "k": 1}), (frozenset({1}), frozenset({True})),
         # equal but written differently (review of lane s19c): one instant at two offsets, one number at two scales,
         # signed zeros inside a complex, and the same look-alikes inside a set
         (dt.datetime(2026, 1, 1, 12, tzinfo=dt.UTC),
          dt.datetime(2026, 1, 1, 13, tzinfo=dt.timezone(dt.timedelta(hours=1)))),
         (Decimal("1.0"), Decimal("1")), (complex(0.0, 0.0), complex(-0.0, 0.0)),
         (frozenset({(1,)}), frozenset({(True,)})), (frozenset({0.0}), frozenset({-0.0}))]


@pytest.mark.parametrize(("first", "second"), PAIRS)
def test_a_copy_recalled_one_by_one_keeps_its_own_meta_value(first: Any, second: Any) -> None:
    original = Message("user", TEXT, meta={"id": "o-1", "flag": first})
    copy = Message("user", TEXT, meta={"id": "c-2", "flag": second})
    r = Redactor()
    r.redact_message(original)
    out = r.redact_message(copy)
    assert SECRET not in out.text
    assert out.meta["id"] == "c-2"
    assert repr(out.meta["flag"]) == repr(copy.meta["flag"])


@pytest.mark.parametrize(("first", "second"), PAIRS)
def test_a_copy_learned_in_bulk_keeps_its_own_meta_value(first: Any, second: Any) -> None:
    original = Message("user", TEXT, meta={"id": "o-1", "flag": first})
    copy = Message("user", TEXT, meta={"id": "c-2", "flag": second})
    third = original.with_id("o-3")  # (a third id: clean_ids needs two strings to search)
    r = Redactor()
    r.learn_from([original, copy, third])
    out = r.redact_messages([original, copy, third])
    assert repr(out[1].meta["flag"]) == repr(second)
    assert repr(out[0].meta["flag"]) == repr(out[2].meta["flag"]) == repr(first)
    assert all(SECRET not in m.text for m in out)


@pytest.mark.parametrize(("first", "second"), PAIRS)
def test_a_copy_keeps_its_own_extra_value(first: Any, second: Any) -> None:
    original = Message("user", TEXT, meta={"id": "o-1"}, extra={"x": first})
    copy = Message("user", TEXT, meta={"id": "c-2"}, extra={"x": second})
    r = Redactor()
    r.redact_message(original)
    assert repr(r.redact_message(copy).extra["x"]) == repr(second)


@pytest.mark.parametrize(("first", "second"), PAIRS)
def test_a_copy_keeps_its_own_parts_and_calls_values(first: Any, second: Any) -> None:
    def message(value: Any, own: str) -> Message:
        return Message("assistant", (TextPart(TEXT, extra={"x": value}), UnknownPart({"type": "x", "v": value})),
                       (ToolCall("c1", "run", "{}", extra={"x": value}),), meta={"id": own})

    original, copy = message(first, "o-1"), message(second, "c-2")
    r = Redactor()
    r.redact_message(original)
    out = r.redact_message(copy)
    assert SECRET not in out.text and out.meta["id"] == "c-2"
    text_part, unknown = out.content
    assert isinstance(text_part, TextPart) and isinstance(unknown, UnknownPart)
    assert repr(text_part.extra["x"]) == repr(unknown.data["v"]) == repr(out.tool_calls[0].extra["x"]) == repr(second)


def test_the_archived_transcript_keeps_each_messages_value_types() -> None:
    # Through a manager's bulk add and its compaction's catch-up: messages holding a secret given with flag 1 and
    # others, equal but for that, with flag True. On afa4c7c the True ones are archived with flag 1.
    hist: list[Message] = []
    for i in range(1500):
        hist.append(Message("user", f"filler {i} " + "lorem ipsum " * 30))
        if i % 10 == 0:
            hist.append(Message("user", TEXT, meta={"flag": 1 if i % 20 else True}))
    cm = ContextManager("gpt-4o", max_context_tokens=8_000, store="memory", archive="memory",
                        session_id=f"types-{id(object())}")
    try:
        cm.add(hist)
        cm.prepare_messages()
        assert cm.archive is not None
        written = [m for _, ms in cm.archive.transcripts(cm.session_id) for m in ms if "password=" in m.text]
        assert written and all(SECRET not in m.text for m in written)
        kinds = sorted(type(m.meta["flag"]).__name__ for m in written)
        assert kinds == ["bool"] * 75 + ["int"] * 75
    finally:
        cm.close()


_leaves = st.none() | st.booleans() | st.integers(-2, 2) | st.floats(allow_nan=False) | st.text(max_size=3)
_values = st.recursive(_leaves,
                       lambda inner: st.lists(inner, max_size=3).map(tuple)
                       | st.dictionaries(st.text(max_size=2), inner, max_size=3), max_leaves=8)


@settings(deadline=None)  # (no time limit: a loaded CI machine is not a failure)
@given(_values, _values)
def test_same_value_is_equality_of_the_same_types(a: Any, b: Any) -> None:
    # Stricter than == only, and exactly as strict as comparing what JSON and repr write of them.
    from contextfold.redact._ledger import same_value

    if same_value(a, b):
        assert a == b and repr(a) == repr(b)
    elif a == b:
        assert repr(a) != repr(b)
    assert same_value(a, a)
