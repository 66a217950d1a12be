"""Reading the providers' media refusals, and taking the oldest media out (exact results, properties)."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.media import LOW_WATER, MediaLimits, evict_oldest_media, media_of, parse_media_limit, request_bytes
from contextfold.messages import DocumentPart, ImagePart, Message, TextPart
from contextfold.recovery import parse_limit_error, parse_overflow

NONCE = uuid.uuid4().hex[:8]


class _StatusError(Exception):
    """An SDK-like error: a status code and a JSON body (as openai/anthropic raise them)."""

    def __init__(self, status_code: int, body: object, message: str = "") -> None:
        super().__init__(message or str(body))
        self.status_code = status_code
        self.body = body


@pytest.mark.parametrize(("error", "kind", "limit", "sent"), [
    (_StatusError(413, {"type": "error", "error": {"type": "request_too_large",
                                                   "message": "Request exceeds the maximum allowed number of bytes."}}),
     "bytes", None, None),
    ("Request too large (max 32MB). Try with a smaller file.", "bytes", 32_000_000, None),
    (_StatusError(413, "<html><body><h1>413 Request Entity Too Large</h1></body></html>"), "bytes", None, None),
    (_StatusError(400, {"type": "error", "error": {"type": "invalid_request_error",
                                                   "message": "Too much media: 0 document pages + 103 images > 100"}}),
     "items", 100, 103),
    ('{"type":"error","error":{"type":"invalid_request_error",'
     '"message":"too many images and documents: 104 + 1 > 100"}}',
     "items", 100, 105),
    ("Too many images in request. Max is 10.", "items", 10, None),
    ("At most 5 image(s) may be provided in one request.", "items", 5, None),
    ("Request contains 52 images, exceeding the maximum of 50 allowed per request", "items", 50, 52),
])
def test_each_wording_is_read_with_its_figures(error: object, kind: str, limit: int | None, sent: int | None) -> None:
    info = parse_media_limit(error)
    assert info is not None
    assert (info.kind, info.limit, info.sent) == (kind, limit, sent)
    assert parse_overflow(error) is None  # a media refusal never teaches a token limit
    assert parse_limit_error(error) == info


@pytest.mark.parametrize("error", [
    _StatusError(429, {"error": {"message": "Request too large for gpt-4o in organization org-x on tokens per min "
                                            "(TPM): Limit 30000, Requested 45000.", "type": "tokens",
                                 "code": "rate_limit_exceeded"}}),
    "Request too large for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Requested 45000.",
    _StatusError(400, {"error": {"message": "Invalid image.", "type": "invalid_request_error"}}),
    "prompt is too long: 210000 tokens > 200000 maximum",
    _StatusError(500, {"error": {"message": "The server had an error", "type": "server_error"}}),
])
def test_other_errors_are_not_media_refusals(error: object) -> None:
    assert parse_media_limit(error) is None


@pytest.mark.parametrize("error", [
    # OpenAI's 400 for an invalid enum value echoes the client's value (here an image's "detail") whole.
    f"Invalid value: 'Too many images in request. Max is 1 {NONCE}'. Supported values are: 'low', 'high', and 'auto'.",
    _StatusError(400, {"error": {"message": "Invalid value: 'Too many images in request. Max is 1'. Supported "
                                            f"values are: 'low', 'high', and 'auto'. {NONCE}",
                                 "type": "invalid_request_error", "param": "messages[0].content[1]"}}),
    # ... and rendered by a wrapper in its own text, the message quoted under its key.
    "BadRequestError: OpenAIException - {'error': {'message': \"Invalid value: 'Too many images in request. Max is "
    f"1'. Supported values are: 'low'.\", 'type': 'invalid_request_error'}}}} {NONCE}",
    '{"error": {"message": "Invalid value: \\"At most 1 image may be provided in one request\\". ' + NONCE + '"}}',
], ids=["text", "sdk-error", "wrapper-text", "escaped-json"])  # (ids: the values hold this process's nonce)
def test_an_item_wording_the_error_quotes_is_the_clients_not_a_limit(error: object) -> None:
    assert parse_media_limit(error) is None


@pytest.mark.parametrize(("error", "limit"), [
    # A wrapper rendering the provider's body quotes its message under its key: that message is the provider's.
    (f"BadRequestError: OpenAIException - {{'error': {{'message': 'Too many images in request. Max is 10.', "
     f"'type': 'invalid_request_error'}}}} {NONCE}", 10),
    ('AnthropicException - {"type":"error","error":{"type":"invalid_request_error","message":"Too much media: '
     f'0 document pages + 103 images > 100"}}}} {NONCE}', 100),
    (f"You can't send that many ({NONCE}). Too many images in request. Max is 10. It's the model's limit.", 10),
], ids=["wrapper-repr", "wrapper-json", "apostrophes"])
def test_an_item_wording_a_wrapper_quotes_as_the_message_is_read(error: str, limit: int) -> None:
    info = parse_media_limit(error)
    assert info is not None and (info.kind, info.limit) == ("items", limit)


def test_a_context_overflow_is_still_an_overflow_for_recovery() -> None:
    info = parse_limit_error("prompt is too long: 210000 tokens > 200000 maximum")
    assert info is not None and getattr(info, "prompt_tokens", None) == 210_000


def _image(n: int, size: int) -> ImagePart:
    return ImagePart(data="A" * size, media_type="image/png", extra={"n": n})


_messages = st.lists(
    st.tuples(st.sampled_from(["user", "assistant", "system"]), st.booleans(),
              st.lists(st.integers(min_value=1, max_value=5_000), max_size=3)),
    min_size=1, max_size=25)


@settings(max_examples=150, deadline=None)
@given(_messages, st.integers(min_value=1, max_value=12), st.integers(min_value=500, max_value=40_000),
       st.integers(min_value=0, max_value=2_000))
def test_eviction_takes_only_the_oldest_media_of_messages_that_may_lose_them(
        spec: list[tuple[str, bool, list[int]]], max_items: int, max_bytes: int, text_tokens: int) -> None:
    messages = [Message(role=role, content=(TextPart(f"m{i} {NONCE}"), *(_image(i * 10 + k, size)
                                                                           for k, size in enumerate(sizes))),
                        meta={"protected": True} if protected else {})
                for i, (role, protected, sizes) in enumerate(spec)]
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)

    def keep(i: int, m: Message) -> bool:
        return i == last_user or m.protected or m.role == "system"

    limits = MediaLimits(max_bytes=max_bytes, max_items=max_items)
    out, evicted = evict_oldest_media(messages, limits, text_tokens=text_tokens, keep=keep)
    assert len(out) == len(messages)
    before = sum((media_of(m) for m in messages), start=media_of(messages[0]) - media_of(messages[0]))
    after = sum((media_of(m) for m in out), start=before - before)
    assert before.items - after.items == evicted
    for i, (old, new) in enumerate(zip(messages, out, strict=True)):
        assert (new.role, new.protected) == (old.role, old.protected)
        assert len(new.content) == len(old.content)  # one text in place of each item taken
        if keep(i, old):
            assert new is old
        for a, b in zip(old.content, new.content, strict=True):
            assert b == a or (isinstance(a, ImagePart | DocumentPart) and isinstance(b, TextPart)
                              and b.text.startswith("[image (image/png, "))
    goal_items, goal_bytes = max(1, int(max_items * LOW_WATER)), int(max_bytes * LOW_WATER)

    def over(tally: object) -> bool:
        return tally.items > goal_items or request_bytes(tally, text_tokens) > goal_bytes  # type: ignore[attr-defined]

    if not over(before):
        assert evicted == 0 and out == messages
        return
    # Oldest first: once an item stays, every later evictable item stays too; and it stops as soon as it is under.
    taken = [(i, k) for i, (a, b) in enumerate(zip(messages, out, strict=True))
             for k, (pa, pb) in enumerate(zip(a.content, b.content, strict=True)) if pa != pb]
    evictable = [(i, k) for i, m in enumerate(messages) if not keep(i, m)
                 for k, p in enumerate(m.content) if isinstance(p, ImagePart)]
    assert taken == evictable[:len(taken)]
    if len(taken) < len(evictable):
        assert not over(after)
