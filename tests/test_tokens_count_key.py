"""The count cache's key (issue 22: shaped by the number of calls): messages that count differently never share it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.messages import Message, ToolCall
from contextfold.tokens import counter_for_model

_names = st.sampled_from(["bash", "str_replace_editor_with_a_long_name"])
_calls = st.lists(st.builds(ToolCall, st.sampled_from(["c1", "c2"]), _names,
                            st.sampled_from(["{}", '{"a": 1}', '{"a": 12345}'])), max_size=3).map(tuple)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["assistant", "user", "tool"]), st.sampled_from(["", "ok", "ok ok"]),
                          _calls, st.none() | st.sampled_from(["bash", "x"])), min_size=1, max_size=12))
def test_every_count_found_in_the_cache_is_the_message_own(shapes: list[tuple[str, str, tuple[ToolCall, ...],
                                                                             str | None]]) -> None:
    cached = counter_for_model("gpt-4o")
    for role, text, calls, name in shapes:
        m = Message(role, text, calls if role == "assistant" else (), name=name)
        assert cached.count_message(m) == cached._count_uncached(m)  # (the count made anew, not looked up)


def test_messages_differing_only_in_a_call_count_apart() -> None:
    counter = counter_for_model("gpt-4o")
    short, long = ToolCall("c1", "bash", "{}"), ToolCall("c1", "str_replace_editor_with_a_long_name", "{}")
    wide = ToolCall("c1", "bash", '{"path": "/testbed/astropy/modeling/separable.py"}')
    variants = [Message.assistant("ok"), Message.assistant("ok", [short]), Message.assistant("ok", [long]),
                Message.assistant("ok", [wide]), Message.assistant("ok", [short, short]),
                Message.assistant("ok", [short, long]), Message("assistant", "ok", name="agent_with_a_long_name")]
    counts = [counter.count_message(m) for m in variants]
    assert counts == [counter._count_uncached(m) for m in variants]
    assert len(set(counts)) == len(counts)
