"""Bulk redaction finds what redaction one text at a time finds, whatever a user pattern's need reads.

The bulk prefilter searches each need of the patterns without triggers once, over the texts joined with the
separator; the gate then skips, in a text, the patterns whose need that search did not find there. ``finditer``'s
matches do not overlap and may run across a separator (a match begun in text i-1 swallowed text i's own), and an
anchor, word boundary or lookaround reads the text around a match (the separator at a join): such a text was
cleared unredacted in bulk and redacted one by one (a leak; review of the fourteenth session).
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.messages import Message
from contextfold.redact import Redactor
from contextfold.redact._joins import holding_texts
from contextfold.redact._ledger import SEPARATOR, joined_starts
from contextfold.redact._pattern import SecretPattern

_NONCE = "w4n9c"
_TRIGGERED = SecretPattern("qq", re.compile(r"qq\d{10}"), ("qq",), needs=re.compile(r"qq\d{10}"))


def _bulk_and_alone(patterns: list[SecretPattern], texts: list[str]) -> tuple[list[object], list[object]]:
    bulk = Redactor(patterns=patterns, builtin=False, remember=False)
    alone = Redactor(patterns=patterns, builtin=False, remember=False)
    out = [m.content for m in bulk.redact_messages([Message.user(t) for t in texts])]
    return out, [alone.redact_text(t) for t in texts]


def test_a_need_match_running_across_a_join_does_not_hide_the_next_texts_own() -> None:
    crossing = SecretPattern("zz", re.compile(r"zz\d{6}"), (), needs=re.compile(r"z[^ ]{7}"))
    for patterns in ([crossing, _TRIGGERED], [crossing]):
        out, alone = _bulk_and_alone(patterns, [f"abc {_NONCE} z", f"zz123456 qq rest of {_NONCE}"])
        assert out == alone
        assert out[1] == f"[REDACTED:zz] qq rest of {_NONCE}"


def test_an_anchored_need_is_read_in_each_text_alone() -> None:
    anchored = SecretPattern("zz", re.compile(r"^zz\d{6}"), (), needs=re.compile(r"^zz\d"))
    for patterns in ([anchored, _TRIGGERED], [anchored]):
        out, alone = _bulk_and_alone(patterns, [f"abc {_NONCE}", f"zz123456 qq rest {_NONCE}"])
        assert out == alone
        assert out[1] == f"[REDACTED:zz] qq rest {_NONCE}"


# Needs that read past their match (anchors, boundaries, lookarounds) or may match the separator ([^ ], .).
_NEEDS = [r"^zz\d", r"zz\d$", r"\Azz", r"\bzz\d", r"\Bz\d", r"z[^ ]{7}", r"z.{3}\d", r"(?<=a)zz", r"zz(?!\d)",
          r"(?m)^z", r"z\d+\Z", r"[^a]z\d", r"z\s*\d"]
_pieces = st.sampled_from(["zz", "z", "zz123456", "a", " ", "\n", "qq", "1", "9", "qq1234567890", "x", _NONCE])
_texts = st.lists(_pieces, max_size=6).map("".join)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(_NEEDS), st.booleans(), st.lists(_texts, min_size=1, max_size=6))
def test_bulk_redaction_equals_redaction_one_text_at_a_time(need: str, triggered: bool, texts: list[str]) -> None:
    # (The pattern matches what its need reads and a little more: wherever the need does not hold, it cannot match.)
    pattern = SecretPattern("zz", re.compile(need + r"[\d ]*"), (), needs=re.compile(need))
    out, alone = _bulk_and_alone([pattern, _TRIGGERED] if triggered else [pattern], texts)
    assert out == alone


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([*_NEEDS, r"zz\d", r"z*", r"(?:a|z)\d{2}", r"[a-z0-9+/]{4,}", r"\d\x00?\d"]),
       st.lists(_texts, min_size=1, max_size=6))
def test_the_joined_search_finds_exactly_the_texts_a_need_matches_alone(need: str, texts: list[str]) -> None:
    regex = re.compile(need)
    assert holding_texts(regex, SEPARATOR.join(texts), joined_starts(texts)) == {
        i for i, text in enumerate(texts) if regex.search(text) is not None}
