"""The proxy's SSE splitter gives the same events however the stream is cut into chunks, and searches each byte once.

A chunk is searched with the last three bytes before it (a boundary cut in two); a9a74c5 searched the whole buffer
again for every chunk, quadratic for a stream with no blank line up to the 16 MiB it holds before passing it on.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.serve import sse
from contextfold.serve.sse import SseSplitter


def split_whole(data: bytes) -> list[bytes]:
    """The events of ``data`` read at once: up to each leftmost boundary, the rest as the last (blank ones left out)."""
    found: list[bytes] = []
    while (match := sse._BOUNDARY.search(data)) is not None:
        found.append(data[:match.end()])
        data = data[match.end():]
    return [raw for raw in [*found, data + b"\n\n" if data.strip() else b""] if raw.strip()]


def split_in(chunks: list[bytes]) -> list[bytes]:
    splitter = SseSplitter()
    found = [event.raw for chunk in chunks for event in splitter.feed(chunk)]
    return found + [event.raw for event in splitter.rest()]


PIECES = st.sampled_from([b"\r", b"\n", b"\r\n", b"data: x", b"event: e", b"a", b":", b" ", b"\n\n", b"\r\r"])


@settings(max_examples=400, deadline=None)
@given(st.lists(PIECES, max_size=40), st.data())
def test_any_chunking_gives_the_events_of_the_whole(pieces: list[bytes], data: st.DataObject) -> None:
    whole = b"".join(pieces)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(whole)), max_size=12)))
    chunks = [whole[a:b] for a, b in zip([0, *cuts], [*cuts, len(whole)], strict=True)]
    assert split_in(chunks) == split_whole(whole)


def test_a_stream_without_a_blank_line_is_passed_on_past_the_limit(monkeypatch: object) -> None:
    import pytest

    patch = pytest.MonkeyPatch()
    patch.setattr(sse, "_MAX_EVENT_BYTES", 100)
    try:
        splitter = SseSplitter()
        out = [event.raw for chunk in [b"x" * 60, b"y" * 60, b"z" * 10, b"\n\ndata: 1\n\n"]
               for event in splitter.feed(chunk)]
    finally:
        patch.undo()
    assert out == [b"x" * 60 + b"y" * 60, b"z" * 10 + b"\n\n", b"data: 1\n\n"]
