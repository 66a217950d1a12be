"""The in-memory archive's transcript pieces are the JSON lines, whatever was made ahead (review9, held).

Attacks sum9's and ahead9's transcript work (d2e4573, f4ae97f): a copy's line is cut from the line the read-ahead
made, templates are shared per origin, a line is looked up only where one is used. Copies of a few messages (some
serialized ahead, some repeated, ids of any text, meta of other keys, non-ASCII and lone surrogates): the pieces
joined equal the plain JSON transcript. Hunted with 1,500 examples before committing at a modest size.
"""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.messages import Message
from contextfold.serialize import dumps_messages, encode_message_pieces, message_line

_TEXTS = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30) | st.sampled_from(
    ["é", "\ud800x", 'a"b', "\\", "x" * 300])
_MESSAGES = st.builds(lambda role, text, meta: Message(role, text, meta=meta),
                      st.sampled_from(["user", "assistant", "system"]), _TEXTS,
                      st.dictionaries(st.sampled_from(["id", "label", "kind"]), st.text(max_size=8), max_size=3))


@settings(max_examples=80, deadline=None)
@given(st.lists(_MESSAGES, min_size=1, max_size=6),
       st.lists(st.tuples(st.integers(0, 5), st.text(max_size=10), st.booleans(), st.booleans()), max_size=12))
def test_pieces_equal_the_json_transcript(origins: list[Message], copies: list[tuple[int, str, bool, bool]]) -> None:
    items: list[Message] = []
    for index, own, ahead, twice in copies:
        copy = origins[index % len(origins)].with_meta(id=own or uuid.uuid4().hex[:6])
        if ahead:
            message_line(copy)
        items += [copy, copy] if twice else [copy]
    items += origins
    assert b"".join(encode_message_pieces(items)) == dumps_messages(items).encode("utf-8", "surrogatepass")
