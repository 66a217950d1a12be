"""The answered message: which messages a reply responds to, and when a view shows them with real content."""

from __future__ import annotations

from contextfold.answered import answered_in_view, answered_indices, has_real_content
from contextfold.messages import Message, ToolCall


def history() -> list[Message]:
    return [
        Message.system("policy"),
        Message.user("change my flight"),
        Message.assistant("", [ToolCall("a", "get_reservation"), ToolCall("b", "get_user")]),
        Message.tool("a", '{"reservation_id": "ZFA04Y"}'),
        Message.tool("b", '{"user_id": "mia_li_3668"}'),
    ]


def test_ending_in_tool_results_the_call_and_all_its_results_are_answered() -> None:
    assert answered_indices(history()) == (2, 3, 4)


def test_ending_in_a_user_message_it_is_answered() -> None:
    msgs = [*history(), Message.assistant("Done."), Message.user("thanks, also the bags")]
    assert answered_indices(msgs) == (6,)
    # An assistant reply at the end: the latest user message is still what is being answered.
    assert answered_indices(msgs[:6]) == (1,)
    assert answered_indices([Message.system("s")]) == ()


def test_a_masked_or_stubbed_result_is_not_in_view() -> None:
    msgs = history()
    assert answered_in_view(msgs, msgs)
    masked = [*msgs[:4], msgs[4].with_content("[tool output trimmed; ref=tout_0123456789abcdef]").with_meta(
        kind="masked")]
    assert not answered_in_view(msgs, masked)
    stub = "[... lines 1-1 of 1 omitted; read them with x ...]\n[tool output cached as ref=tout_0123456789abcdef]"
    assert not has_real_content('{"user_id": "mia_li_3668", "x": "' + "y" * 500 + '"}', stub)
    missing_call = [msgs[0], msgs[1], msgs[3], msgs[4]]
    assert not answered_in_view(msgs, missing_call)


def test_a_truncated_result_with_content_is_in_view() -> None:
    original = "line\n" * 2_000
    shown = "line\n" * 30 + "[... lines 31-1990 of 2000 omitted; read ...]\n" + "line\n" * 10
    assert has_real_content(original, shown)
