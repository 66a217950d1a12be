"""Messages survive ``pickle`` and ``copy.deepcopy`` (a fleet hands them to other processes, frameworks deep-copy
their state): the copy equals the original, stays read-only, and shares nothing mutable with it."""

from __future__ import annotations

import copy
import pickle
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.messages import (
    DocumentPart,
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCall,
    UnknownPart,
)

_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                   max_size=3),
                     max_leaves=8)
_mappings = st.dictionaries(st.text(min_size=1, max_size=6), _json, max_size=3)
_parts = st.one_of(
    st.builds(TextPart, st.text(max_size=20), extra=_mappings.map(MappingProxyType)),
    st.builds(ImagePart, url=st.just("https://example.invalid/a.png"), detail=st.sampled_from([None, "low"])),
    st.builds(DocumentPart, file_id=st.text(min_size=1, max_size=8), cache_control=st.just({"type": "ephemeral"})),
    st.builds(ThinkingPart, st.text(max_size=10), signature=st.text(max_size=6)),
    st.builds(UnknownPart, _mappings.map(MappingProxyType), format=st.just("anthropic")),
)


@st.composite
def messages(draw: st.DrawFn) -> Message:
    role = draw(st.sampled_from(["user", "assistant", "tool"]))
    content: Any = draw(st.text(max_size=30) | st.lists(_parts, min_size=1, max_size=3).map(tuple))
    calls = tuple(ToolCall(f"c{i}", "run", '{"a": 1}', extra=draw(_mappings))
                  for i in range(draw(st.integers(0, 2)))) if role == "assistant" else ()
    message = Message(role, content, calls, tool_call_id="c0" if role == "tool" else None,
                      meta=draw(_mappings), extra=draw(_mappings))
    # contextfold's own copies (slot by slot, with an origin) must survive too
    return message.with_meta(id="s:1") if draw(st.booleans()) else message


def _assert_same_kinds(copied: Message, m: Message) -> None:
    """A message's meta and extra are read-only; its parts' and calls' mappings keep the type they were given."""
    assert isinstance(copied.meta, MappingProxyType) and isinstance(copied.extra, MappingProxyType)
    for new, old in zip((*copied.tool_calls, *copied.parts), (*m.tool_calls, *m.parts), strict=True):
        assert type(new) is type(old) and type(new.extra) is type(old.extra)


@settings(max_examples=60)
@given(messages())
def test_pickle_and_deepcopy_give_an_equal_read_only_message(m: Message) -> None:
    for copied in (pickle.loads(pickle.dumps(m)), copy.deepcopy(m), copy.copy(m)):
        assert copied == m
        assert copied.fingerprint() == m.fingerprint()
        assert type(copied.content) is type(m.content)
        _assert_same_kinds(copied, m)


def test_a_deep_copy_shares_no_nested_value() -> None:
    m = Message("user", "hi", meta={"nested": {"k": [1]}}, extra={"provider": {"v": 2}})
    copied = copy.deepcopy(m)
    assert copied.meta["nested"] == {"k": [1]} and copied.meta["nested"] is not m.meta["nested"]
    copied.meta["nested"]["k"].append(2)  # (nested values are plain data, as the constructor keeps them)
    assert m.meta["nested"] == {"k": [1]}


def test_an_empty_meta_given_is_read_only_too() -> None:
    m = Message("user", "hi", meta={}, extra={})
    with pytest.raises(TypeError):
        m.meta["id"] = "y"  # type: ignore[index]
    assert isinstance(m.extra, MappingProxyType)


def test_a_pickled_copy_still_refuses_changes() -> None:
    copied = pickle.loads(pickle.dumps(Message("user", "hi", meta={"id": "x"})))
    with pytest.raises(TypeError):
        copied.meta["id"] = "y"  # type: ignore[index]
