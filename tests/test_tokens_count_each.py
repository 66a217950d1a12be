"""``MessageCounter.count_each``: the counts ``count_message`` gives, in order, cached or not (issue 22's bulk path)."""

from __future__ import annotations

from contextfold.messages import Message, TextPart, ToolCall
from contextfold.tokens import counter_for_model
from contextfold.tokens.counting import MessageCounter


def _messages() -> list[Message]:
    call = ToolCall("c1", "bash", '{"cmd": "ls -la"}')
    return [Message("system", "be brief"), Message("user", "list the files"), Message("assistant", "", (call,)),
            Message("tool", "a\nb\nc", tool_call_id="c1", name="bash"),
            Message("user", (TextPart("two"), TextPart("parts"))), Message("user", "list the files")]


def test_count_each_is_count_message_of_each_cached_or_not() -> None:
    messages = _messages()
    expected = [counter_for_model("gpt-4o").count_message(m) for m in messages]
    counter = counter_for_model("gpt-4o")
    counter.count_message(messages[1])  # (one already cached, the rest counted on the way)
    assert counter.count_each(messages) == expected
    assert counter.count_each(messages) == expected  # (all cached now)
    assert counter.count_each([]) == []


def test_a_subclass_that_counts_its_own_way_is_asked() -> None:
    class Flat(MessageCounter):
        def count_message(self, message: Message) -> int:
            return 7

    base = counter_for_model("gpt-4o")
    flat = Flat(base.counter)
    assert flat.count_each(_messages()) == [7] * 6


def test_copies_of_a_message_are_counted_once_per_call_as_their_origin() -> None:
    # A repeated history's copies (Message.with_meta(id=...)): the origin's count, asked of the cache once a call.
    origin = Message("tool", "output qx7c2 " * 50, tool_call_id="c1", name="bash")
    other = Message("user", "another qx7c2")
    batch = [m for i in range(200) for m in (origin.with_meta(id=f"o{i}"), other.with_meta(id=f"u{i}"))]
    expected = [counter_for_model("gpt-4o").count_message(m) for m in batch[:2]] * 200
    counter = counter_for_model("gpt-4o")
    asked: list[Message] = []
    count_message = counter.count_message

    def spied(message: Message) -> int:
        asked.append(message)
        return count_message(message)

    counter.count_message = spied  # type: ignore[method-assign]
    assert counter.count_each(batch) == expected
    assert len(asked) == 2  # (the first copy of each origin: not cached yet)
    assert counter.count_each(batch) == expected and len(asked) == 2  # (cached, found once per origin)
