"""redact_text's memo of short strings found clean answers as a redactor asked afresh (review9, held).

Attacks led9's memo (40e6394): short strings found clean are remembered for one generation of one memory of one
redactor. Interleaved with secrets learned bare and in context, and with copies of the redactor, every answer must be
what a fresh redactor that learned the same secrets gives.
"""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.redact import Redactor

_PIECES = st.sampled_from(["tok", "Kq7", "Zp9", "x", "=", " ", "/", "password=", "api_key: ", "AKIA", "-", "_"])
_TEXTS = st.lists(_PIECES, min_size=1, max_size=8).map("".join)
# (op, text): "ask" redact_text(text); "learn" the text as a secret; "context" learn_text("password=" + text)
_OPS = st.lists(st.tuples(st.sampled_from(["ask", "ask", "ask", "learn", "context"]), _TEXTS), min_size=1, max_size=25)


@settings(max_examples=30, deadline=None)
@given(_OPS)
def test_answers_equal_a_fresh_redactor_that_learned_the_same(ops: list[tuple[str, str]]) -> None:
    nonce = uuid.uuid4().hex[:6]  # (process-wide caches are keyed by text: these texts are this example's own)
    carried = Redactor()
    for op, text in ops:
        text = f"{text}{nonce}"
        if op == "learn":
            carried.learn(text, "password")
        elif op == "context":
            carried.learn_text(f"password={text}")
        else:
            # (redact_text learns what it finds in context too: the fresh one is taught all the carried one knows)
            fresh = Redactor()
            for value, kind in carried.memory.values().items():
                fresh.learn(value, kind)
            for asked in (text, f"[{text}]", f"{text} {text}"):
                expected = fresh.redact_text(asked)
                assert carried.redact_text(asked) == expected
