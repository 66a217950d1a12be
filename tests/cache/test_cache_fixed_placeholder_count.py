"""A placeholder listing nothing is counted from its pieces, not by the encoder (issue 22, eighteenth session).

An output over the light digest's bound lists nothing: its placeholder is a fixed text around its ref id. The
read-ahead counted each one with an encoder call (~50 us on its cold caches); o200k's and cl100k's pre-tokenizers cut
it where ``cache.masking._fixed_placeholder_pieces`` says, so the count is the sum of its pieces', each remembered.
The sum must be the encoder's count for every ref id and every encoding the counter knows; and an output too long to
read is handed to the session's learning, not blanked (the same secrets learned, no copy of it made).
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.cache import ToolOutputCache, mask_tool_outputs
from contextfold.cache._light_digest import LIGHT_MAX_CHARS
from contextfold.cache.masking import _fixed_placeholder_pieces, masked_placeholder, placeholder_ahead
from contextfold.messages import Message, ToolCall
from contextfold.redact import Redactor
from contextfold.stores import MemoryBlobStore
from contextfold.tokens import MessageCounter, TiktokenCounter, counting

ENCODINGS = sorted(counting._ENCODING_SPECS)
REF_IDS = st.text(alphabet="0123456789abcdef", min_size=16, max_size=16).map(lambda h: f"tout_{h}")


@pytest.mark.parametrize("encoding", ENCODINGS)
@settings(max_examples=200, deadline=None)
@given(ref_id=REF_IDS)
def test_a_fixed_placeholder_counts_what_the_encoder_counts(encoding: str, ref_id: str) -> None:
    counter = TiktokenCounter(encoding)
    placeholder = masked_placeholder(ref_id)
    pieces = _fixed_placeholder_pieces(placeholder, ref_id)
    assert pieces is not None and "".join(pieces) == placeholder
    assert counter.count_split(placeholder, pieces) == len(counter.encoding.encode_ordinary(placeholder))
    assert counter.count(placeholder) == len(counter.encoding.encode_ordinary(placeholder))  # (as remembered)


@pytest.mark.parametrize("ref_id", ["tout_0000000000000000", "tout_ffffffffffffffff", "tout_1234567890123456",
                                    "tout_abcdefabcdefabcd", "tout_0a0a0a0a0a0a0a0a", "tout_a0a0a0a0a0a0a0a0"])
@pytest.mark.parametrize("encoding", ENCODINGS)
def test_the_edges_of_a_ref_id_count_as_the_encoder_does(encoding: str, ref_id: str) -> None:
    counter = TiktokenCounter(encoding)
    placeholder = masked_placeholder(ref_id)
    pieces = _fixed_placeholder_pieces(placeholder, ref_id)
    assert pieces is not None
    assert counter.count_split(placeholder, pieces) == len(counter.encoding.encode_ordinary(placeholder))


def test_a_placeholder_with_a_digest_has_no_pieces() -> None:
    ref_id = "tout_0123456789abcdef"
    assert _fixed_placeholder_pieces(masked_placeholder(ref_id, "loader.py"), ref_id) is None
    assert _fixed_placeholder_pieces(masked_placeholder(ref_id), "tout_0123456789abcde0") is None


def _long_output_history(nonce: str) -> list[Message]:
    secret = f"Qz7v{nonce}Lp2Rw9Xk"
    long_output = f"export DB_PASSWORD={secret}\n" + f"row ok {nonce}\n" * 400
    assert len(long_output) > LIGHT_MAX_CHARS
    return [Message("user", "go"),
            Message("assistant", "", (ToolCall("c1", "bash", '{"cmd": "env"}'),)),
            Message("tool", long_output, tool_call_id="c1", name="bash"),
            Message("assistant", "done")]


def test_a_long_output_built_ahead_is_counted_without_the_encoder_and_learned_not_blanked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    nonce = f"{uuid.uuid4().int % 10**12:012d}"
    history = _long_output_history(nonce)
    redactor = Redactor()
    cache = ToolOutputCache(MemoryBlobStore())
    cache.secrets = redactor
    counter = MessageCounter(TiktokenCounter("o200k_base"))
    encoded: list[str] = []
    blanked: list[str] = []
    encoding = counter.counter.encoding
    real_encode, real_blank = encoding.encode_ordinary, Redactor.blank
    monkeypatch.setattr(encoding, "encode_ordinary", lambda text: encoded.append(text) or real_encode(text))
    monkeypatch.setattr(Redactor, "blank", lambda self, text: blanked.append(text) or real_blank(self, text))
    placeholder = placeholder_ahead(history[2], cache, digest_tokens=40, known="", counter=counter.counter,
                                    secrets=redactor, digest_kind="light")
    assert placeholder is not None and "mentioned" not in placeholder
    assert placeholder not in encoded  # (counted from its pieces)
    assert history[2].content not in blanked  # (learned, not blanked)
    assert redactor.mentions_secret(f"Qz7v{nonce}Lp2Rw9Xk")  # (the long output taught it)
    assert counter.count_message(history[2].with_content(placeholder)) == (
        counter.overhead.per_message + len(real_encode("tool")) + len(real_encode("bash")) + counter.overhead.per_name
        + len(real_encode(placeholder)))
    monkeypatch.undo()
    masked = mask_tool_outputs(history, budget_tokens=0, counter=counter, cache=cache, keep_tool_io_pairs=0,
                               clear_at_least=0, digest_tokens=40, digest_kind="light", secrets=redactor)
    assert masked.masked_indices == (2,) and masked.messages[2].content == placeholder
