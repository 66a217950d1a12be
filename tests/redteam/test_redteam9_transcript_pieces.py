"""The in-memory archive's transcript pieces are the JSON lines, whatever was made ahead (review9, held).

Attacks sum9's and ahead9's transcript work (d2e4573, f4ae97f): a copy's line is cut from the line the read-ahead
made, templates are shared per origin, a line is looked up only where one is used. Copies of a few messages (some
serialized ahead, some repeated, ids of any text, meta of other keys, parts, extra, tool calls, non-ASCII and lone
surrogates): the pieces joined equal the plain JSON transcript. Hunted with 1,500 examples on 3b45a3e and on bff3112
(a copy of any shape takes its origin's template) before committing at a modest size.
"""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.messages import ImagePart, Message, Part, TextPart, ToolCall
from contextfold.serialize import dumps_messages, encode_message_pieces, message_line

_TEXTS = st.text(max_size=20) | st.sampled_from(["é", "\ud800x", 'a"b', "\\", "x" * 300, "}}", '"id":'])
_PARTS = st.lists(st.one_of(st.builds(TextPart, _TEXTS),
                            st.builds(lambda data: ImagePart(data=data, media_type="image/png"), _TEXTS)),
                  min_size=1, max_size=3).map(tuple)
_EXTRA = st.dictionaries(st.sampled_from(["_wire", "x", "id"]),
                         _TEXTS | st.dictionaries(st.sampled_from(["format", "k"]), _TEXTS, max_size=2), max_size=2)


def _message(role: str, content: str | tuple[Part, ...], meta: dict[str, str], extra: dict[str, object],
             calls: int) -> Message:
    if role == "assistant" and calls:
        return Message(role, content if isinstance(content, str) else "", meta=meta, extra=extra,
                       tool_calls=tuple(ToolCall(f"c{i}", "f", "{}") for i in range(calls)))
    if role == "tool":
        return Message(role, content, tool_call_id="c0", meta=meta, extra=extra)
    return Message(role, content, meta=meta, extra=extra)


_MESSAGES = st.builds(_message, st.sampled_from(["user", "assistant", "system", "tool"]), _TEXTS | _PARTS,
                      st.dictionaries(st.sampled_from(["id", "label", "kind", "ref"]), _TEXTS, max_size=3),
                      _EXTRA, st.integers(0, 2))


@settings(max_examples=80, deadline=None)
@given(st.lists(_MESSAGES, min_size=1, max_size=6),
       st.lists(st.tuples(st.integers(0, 5), _TEXTS, st.booleans(), st.booleans()), max_size=12))
def test_pieces_equal_the_json_transcript(origins: list[Message], copies: list[tuple[int, str, bool, bool]]) -> None:
    items: list[Message] = []
    for index, own, ahead, twice in copies:
        copy = origins[index % len(origins)].with_meta(id=own or uuid.uuid4().hex[:6])
        if ahead:
            message_line(copy)
        items += [copy, copy] if twice else [copy]
    items += origins
    assert b"".join(encode_message_pieces(items)) == dumps_messages(items).encode("utf-8", "surrogatepass")
