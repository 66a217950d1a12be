"""A message's copies: ``with_meta`` / ``with_content`` give what the constructor would (issue 22's fast copy), and
copies that differ only by ``meta["id"]`` are told apart from other messages by identity."""

from __future__ import annotations

from dataclasses import dataclass

from contextfold.messages import Message, TextPart, ToolCall, same_meta_but_id


def _message() -> Message:
    return Message("assistant", "text", (ToolCall("c1", "run", '{"a": 1}'),), meta={"label": "x", "nested": {"k": 1}},
                   extra={"provider": {"v": 2}})


def test_with_meta_is_the_constructor_with_the_merged_meta() -> None:
    m = _message()
    copy = m.with_meta(id="s:1", label=None, more=[1, 2])
    assert copy == Message(m.role, m.content, m.tool_calls, meta={"nested": {"k": 1}, "id": "s:1", "more": [1, 2]},
                           extra=m.extra)
    assert list(copy.meta) == ["nested", "id", "more"]
    assert copy.meta["nested"] is m.meta["nested"]  # (a value not given is shared, as before)
    given = [3]
    changed = m.with_meta(more=given)
    given.append(4)
    assert changed.meta["more"] == [3]  # (a value given is copied: changing it later changes no message)
    assert type(copy.content) is str and copy.fingerprint() == m.fingerprint()


def test_a_none_value_already_in_meta_goes_as_it_always_did() -> None:
    m = Message("user", "hi", meta={"gone": None, "kept": 1})
    assert dict(m.with_meta(id="a").meta) == {"kept": 1, "id": "a"}


def test_with_content_makes_a_list_of_parts_a_tuple() -> None:
    m = _message().with_content([TextPart("a"), TextPart("b")])  # type: ignore[arg-type]
    assert m.content == (TextPart("a"), TextPart("b"))
    assert m.text == "a\nb" and m.meta == _message().meta


def test_copies_given_only_an_id_are_the_same_but_for_it() -> None:
    m = _message()
    a, b = m.with_meta(id="s:1"), m.with_meta(id="s:2")
    chained = a.with_meta(id="s:3")
    assert same_meta_but_id(a, b) and same_meta_but_id(a, chained) and same_meta_but_id(chained, b)
    other = a.with_meta(label="y")  # (another key changed: no longer a copy of the first)
    assert not same_meta_but_id(other, b)
    flat = Message("user", "hi", meta={"label": "x"})
    built = Message("user", "hi", meta={"label": "x", "id": "s:9"})  # (not made by with_meta: compared, as before)
    assert same_meta_but_id(flat.with_meta(id="s:1"), built)
    assert not same_meta_but_id(flat.with_meta(id="s:1"), Message("user", "hi", meta={"label": "y", "id": "s:9"}))


def test_a_subclass_keeps_its_own_fields() -> None:
    @dataclass(frozen=True, slots=True)
    class Tagged(Message):
        tag: str = ""

    t = Tagged("user", "hi", tag="mine")
    copy = t.with_meta(id="a")
    assert type(copy) is Tagged and copy.tag == "mine" and copy.meta["id"] == "a"
