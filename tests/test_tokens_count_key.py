"""The count cache's key (issue 22: shaped by the number of calls): messages that count differently never share it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.messages import Message, ToolCall
from contextfold.tokens import counter_for_model

_calls = st.lists(st.builds(ToolCall, st.sampled_from(["c1", "c2"]), st.sampled_from(["bash", "read", "b"]),
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
