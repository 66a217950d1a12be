"""Token counting: exact (tiktoken, from BPE files shipped in the package) and estimated, per message, cached.

Text counters implement the one-method :class:`TokenCounter` protocol. :class:`MessageCounter` adds what a
provider adds around the text (per-message framing, names, tool calls, images) and caches every message's count
by its fingerprint, so that counting a history again after appending costs only the new messages.

``tiktoken`` is imported on the first exact count, never at import time: ``import contextfold`` stays fast.
Loading a BPE file takes most of a second, so a :class:`MessageCounter` built with ``lazy=True`` (what the
ContextManager uses) counts UTF-8 bytes until it is loaded (in the background while the agent waits for the
model, or at once when exact counts are needed): a byte-level BPE
token covers at least one byte, so those provisional counts are upper bounds, and a view that is under every
threshold by its upper bound is under it exactly too. Acting (masking, compacting) waits for the exact counts.
"""

from __future__ import annotations

import json
import math
import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any, Protocol, runtime_checkable

from ..formats._common import sent_arguments
from ..messages import DocumentPart, ImagePart, Message, Part, TextPart, ThinkingPart, is_compaction
from .models import encoding_for_model, guess_provider, lookup_model

__all__ = [
    "CHARS_PER_TOKEN",
    "OVERHEADS",
    "EstimatingCounter",
    "MessageCounter",
    "Overhead",
    "TiktokenCounter",
    "TokenCounter",
    "counter_for_model",
]


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the tokens of a text. One method; implement it to plug in any tokenizer.

    >>> class Words:
    ...     def count(self, text: str) -> int:
    ...         return len(text.split())
    >>> MessageCounter(Words()).count_message(Message.user("two words"))
    6
    """

    def count(self, text: str) -> int:
        """The number of tokens ``text`` encodes to."""
        ...


# ---- exact counting with tiktoken ---------------------------------------------------------------------------------

_ENDOFTEXT = "<|endoftext|>"
_ENDOFPROMPT = "<|endofprompt|>"

# Pre-tokenization patterns and special tokens of OpenAI's public encodings; they must match the published
# definitions exactly, or counts drift from what the API bills.
_CL100K_PAT = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|"""
    r"""\s+(?!\S)|\s"""
)
_O200K_PAT = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)


@dataclass(frozen=True, slots=True)
class _EncodingSpec:
    filename: str
    sha256: str
    pat_str: str
    special_tokens: Mapping[str, int]


_ENCODING_SPECS: dict[str, _EncodingSpec] = {
    "o200k_base": _EncodingSpec(
        "o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        _O200K_PAT,
        {_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018},
    ),
    "cl100k_base": _EncodingSpec(
        "cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        _CL100K_PAT,
        {
            _ENDOFTEXT: 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            _ENDOFPROMPT: 100276,
        },
    ),
}

# Loading a BPE file takes ~0.3 s and ~100 MB; one Encoding per process is shared by every counter and thread.
_ENCODINGS: dict[str, Any] = {}
_ENCODINGS_LOCK = threading.Lock()
# Encodings a background thread was started for (see TiktokenCounter.preload); guarded by _ENCODINGS_LOCK's sibling.
_PRELOADING: set[str] = set()
_PRELOAD_LOCK = threading.Lock()


def _load_encoding(name: str) -> Any:
    """The shared ``tiktoken.Encoding`` called ``name``, built once from the package's BPE file (no network)."""
    enc = _ENCODINGS.get(name)
    if enc is not None:
        return enc
    spec = _ENCODING_SPECS.get(name)
    if spec is None:
        raise ValueError(f"encoding: unknown tiktoken encoding {name!r}; expected one of {sorted(_ENCODING_SPECS)}")
    with _ENCODINGS_LOCK:
        enc = _ENCODINGS.get(name)
        if enc is None:
            from importlib import resources

            import tiktoken
            from tiktoken.load import load_tiktoken_bpe

            with resources.as_file(resources.files("contextfold") / "data" / spec.filename) as path:
                ranks = load_tiktoken_bpe(str(path), expected_hash=spec.sha256)
            enc = tiktoken.Encoding(
                name=name, pat_str=spec.pat_str, mergeable_ranks=ranks, special_tokens=dict(spec.special_tokens)
            )
            _ENCODINGS[name] = enc
    return enc


def _preload(name: str) -> None:
    try:
        _load_encoding(name)
    except Exception:  # the next exact count loads again in the caller's thread and raises there, with context
        with _PRELOAD_LOCK:
            _PRELOADING.discard(name)


class TiktokenCounter:
    """Exact token counts for OpenAI models, from the BPE files shipped in the package.

    Special-token text such as ``<|endoftext|>`` is counted as ordinary text (never raises), which is how a
    provider counts it inside a message.
    """

    def __init__(self, encoding_name: str = "o200k_base") -> None:
        if encoding_name not in _ENCODING_SPECS:
            raise ValueError(
                f"encoding_name: unknown tiktoken encoding {encoding_name!r}; expected one of {sorted(_ENCODING_SPECS)}"
            )
        self.encoding_name = encoding_name

    @property
    def encoding(self) -> Any:
        """The shared ``tiktoken.Encoding`` (loaded on first use)."""
        return _load_encoding(self.encoding_name)

    @property
    def ready(self) -> bool:
        """Whether the encoding is loaded (counting costs no load)."""
        return self.encoding_name in _ENCODINGS

    def preload(self) -> None:
        """Start loading the encoding on a daemon thread, once per process; returns at once."""
        name = self.encoding_name
        with _PRELOAD_LOCK:
            if name in _ENCODINGS or name in _PRELOADING:
                return
            _PRELOADING.add(name)
        threading.Thread(target=_preload, args=(name,), name=f"contextfold-load-{name}", daemon=True).start()

    def wait_ready(self) -> None:
        """Load the encoding now, or wait for the thread that is loading it."""
        _load_encoding(self.encoding_name)

    def count(self, text: str) -> int:
        """Tokens of ``text``: exact (``len(encode_ordinary(text))``) up to ``EXACT_COUNT_MAX_CHARS``, then sampled.

        BPE runs at about 1 µs a character: a 10 MB message would take 10 s to count exactly, although anything
        that long is far over every window and an estimate within a few percent decides the same.
        """
        if not text:
            return 0
        short = len(text) <= _SHORT_TEXT_CHARS
        # Long texts are remembered by hash and length, never kept alive (see contextfold._memo).
        key: str | tuple[int, int] = text if short else (hash(text), len(text))
        memo = (_SHORT_COUNTS if short else _LONG_COUNTS).setdefault(self.encoding_name, {})
        n = memo.get(key)
        if n is not None:
            return n
        enc = _ENCODINGS.get(self.encoding_name) or _load_encoding(self.encoding_name)
        if len(text) > EXACT_COUNT_MAX_CHARS:
            return _sampled_count(enc, text)
        n = len(enc.encode_ordinary(text))
        if len(memo) >= (_SHORT_COUNTS_MAX if short else _LONG_COUNTS_MAX):
            _drop_older_half(memo)
        memo[key] = n
        return n

    def __repr__(self) -> str:
        return f"TiktokenCounter({self.encoding_name!r})"


# Counts of short texts by encoding (issue 15): an extractive summary weighs every entity of the history by its
# tokens, ~20,000 names for a 1.4M-token history, and the same names come back in every compaction (and are counted
# ahead on the background thread); a call into the encoder costs ~100 times a dictionary look-up.
_SHORT_TEXT_CHARS = 256
_SHORT_COUNTS_MAX = 65_536
_SHORT_COUNTS: dict[str, dict[str | tuple[int, int], int]] = {}
# ... and of long ones (issue 22): write-time truncation counts a tool output to decide whether to cut it, and the
# message count then counts the same text again when it stays whole; an output that comes back (the same file read
# twice, a repeated test run) is counted once. ~100 bytes an entry.
_LONG_COUNTS_MAX = 16_384
_LONG_COUNTS: dict[str, dict[str | tuple[int, int], int]] = {}



def _drop_older_half(memo: dict[str | tuple[int, int], int]) -> None:
    """Forget the older half of a full ``memo`` (first remembered, first dropped: a dict keeps insertion order).

    Cheaper than LRU bookkeeping on every count, and unlike a wholesale reset it keeps what was just counted: a bulk
    add counts an output to decide its cut, then counts the message a little later (issue 22).
    """
    for key in list(islice(memo, len(memo) // 2)):  # (taken at once; another thread may drop the same keys)
        memo.pop(key, None)


# Texts longer than this are counted from samples (see TiktokenCounter.count): 1 MB is ~8 windows of 32K tokens.
EXACT_COUNT_MAX_CHARS = 1_000_000
# Samples spread evenly over a long text, and their length: 32 × 8K characters counts ~0.26 MB whatever the size.
_SAMPLE_COUNT = 32
_SAMPLE_CHARS = 8_192


def _sampled_count(enc: Any, text: str) -> int:
    """Tokens of a long ``text`` estimated from evenly spaced samples, rounded up (over-counting is the safe side)."""
    step = len(text) // _SAMPLE_COUNT
    sampled_chars = sampled_tokens = 0
    for k in range(_SAMPLE_COUNT):
        chunk = text[k * step:k * step + _SAMPLE_CHARS]
        sampled_chars += len(chunk)
        sampled_tokens += len(enc.encode_ordinary(chunk))
    return math.ceil(len(text) * sampled_tokens / sampled_chars)


# ---- estimated counting -------------------------------------------------------------------------------------------

# Characters per token by tokenizer family, measured on English prose and code. Claude's tokenizer is denser than
# OpenAI's (more tokens per character); the estimate is corrected by provider-reported counts as calls are made.
CHARS_PER_TOKEN: Mapping[str, float] = {
    "anthropic": 3.5,
    "google": 4.0,
    "default": 4.0,
}

# The calibration factor is kept within these bounds: a ratio outside them means the usage figures do not
# belong to the counted messages (e.g. tools or a system prompt not passed), not that the tokenizer is that far off.
_MIN_CALIBRATION = 0.5
_MAX_CALIBRATION = 2.5


class EstimatingCounter:
    """Estimates tokens from characters, for models without a public tokenizer.

    ``calibration`` multiplies the estimate; a :class:`~contextfold.tokens.UsageTracker` moves it towards the ratio
    of provider-reported to estimated counts. ``revision`` changes whenever the calibration does, so that caches
    built on this counter know to start again.
    """

    def __init__(self, chars_per_token: float = CHARS_PER_TOKEN["default"], *, calibration: float = 1.0) -> None:
        if not chars_per_token > 0:
            raise ValueError(f"chars_per_token: must be > 0, got {chars_per_token!r}")
        self.chars_per_token = float(chars_per_token)
        self.calibration = 1.0
        self.revision = 0
        self.set_calibration(calibration)

    @classmethod
    def for_provider(cls, provider: str) -> EstimatingCounter:
        """The estimating counter with the default ratio of ``provider`` (``anthropic``, ``google``, others)."""
        return cls(CHARS_PER_TOKEN.get(provider, CHARS_PER_TOKEN["default"]))

    def set_calibration(self, factor: float) -> None:
        """Set the correction factor (clamped to a sane range); bumps ``revision`` when it changes."""
        if not math.isfinite(factor) or factor <= 0:
            raise ValueError(f"calibration: must be a positive finite number, got {factor!r}")
        factor = min(max(factor, _MIN_CALIBRATION), _MAX_CALIBRATION)
        if factor != self.calibration:
            self.calibration = factor
            self.revision += 1

    def count(self, text: str) -> int:
        """Estimated tokens of ``text`` (at least 1 for non-empty text)."""
        if not text:
            return 0
        return max(1, math.ceil(len(text) / self.chars_per_token * self.calibration))

    def __repr__(self) -> str:
        return f"EstimatingCounter({self.chars_per_token}, calibration={self.calibration:.3f})"


# ---- per-message overheads ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Overhead:
    """Tokens a wire format adds around message text.

    Attributes:
        per_message: framing tokens of every message (start/end markers).
        per_name: extra tokens when a message carries ``name``.
        reply_priming: tokens that prime the reply, added once per request.
        per_tool_call: framing of one tool call, on top of its name and arguments.
        count_role: whether the role string itself is tokenized (OpenAI renders it; others use fixed markers).
    """

    per_message: int
    per_name: int
    reply_priming: int
    per_tool_call: int
    count_role: bool = True


# OpenAI chat: the documented 3 tokens per message, +1 for ``name``, 3 to prime the reply (openai-cookbook
# "How to count tokens with tiktoken"). Tool-call framing is undocumented; 3 matches the function-call wrapper.
# Other formats' framing is not published: these are close estimates, corrected by usage-grounded tracking.
OVERHEADS: Mapping[str, Overhead] = {
    "openai_chat": Overhead(per_message=3, per_name=1, reply_priming=3, per_tool_call=3),
    "openai_responses": Overhead(per_message=3, per_name=1, reply_priming=3, per_tool_call=3),
    "anthropic": Overhead(per_message=4, per_name=0, reply_priming=3, per_tool_call=5, count_role=False),
    "gemini": Overhead(per_message=4, per_name=0, reply_priming=3, per_tool_call=5, count_role=False),
}

# OpenAI bills a low-detail image 85 tokens and a 1024x1024 high-detail image 85 + 4 tiles x 170 = 765; without
# decoding the image those are the best fixed estimates. Anthropic's ~1.15 MP cap lands near the high figure.
IMAGE_TOKENS_LOW = 85
IMAGE_TOKENS_HIGH = 765
# A document part we cannot read as text (PDF): providers bill roughly 1,500-3,000 tokens a page; one page's worth.
DOCUMENT_TOKENS = 2_000
# Encrypted reasoning is billed as the reasoning it hides; base64 inflates it, so about 1 token per 4 characters.
ENCRYPTED_CHARS_PER_TOKEN = 4
# Tool schemas: a namespace preamble once, and per-function framing around the JSON (OpenAI renders them as
# TypeScript-like declarations that tokenize a little shorter than JSON; the JSON count errs on the safe side).
TOOLS_PREAMBLE_TOKENS = 12
PER_TOOL_TOKENS = 8
# Cached message counts. 32k entries hold far more than any context window's messages (~5 MB) while still
# bounding a process that counts many sessions.
DEFAULT_CACHE_SIZE = 32_768


class MessageCounter:
    """Counts messages: content tokens plus the wire format's overhead, cached per message fingerprint.

    The cache is bounded (least recently used entries go first) and thread-safe. It is dropped when the text
    counter's ``revision`` changes (a recalibrated estimate), so cached counts never mix two calibrations; the
    counter's own :attr:`revision` then goes up, so that totals built from its counts (the manager's view) know to
    count again.

    With ``lazy=True`` and a text counter that loads slowly (one with ``ready``, ``preload()`` and
    ``wait_ready()``, like :class:`TiktokenCounter`), counting starts at once: until the tokenizer is loaded (by
    :meth:`preload` on a background thread, or :meth:`wait_exact`), texts count as their UTF-8 bytes
    (:attr:`provisional`), an upper bound of any byte-level BPE count.
    """

    def __init__(
        self,
        counter: TokenCounter,
        *,
        format: str = "openai_chat",
        overhead: Overhead | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
        lazy: bool = False,
    ) -> None:
        if overhead is None:
            if format not in OVERHEADS:
                raise ValueError(f"format: unknown wire format {format!r}; expected one of {sorted(OVERHEADS)}")
            overhead = OVERHEADS[format]
        if cache_size < 1:
            raise ValueError(f"cache_size: must be >= 1, got {cache_size}")
        self.counter = counter
        self.format = format
        self.overhead = overhead
        self.cache_size = cache_size
        self._cache: OrderedDict[Hashable, int] = OrderedDict()
        self._lock = threading.Lock()
        self._counter_revision = getattr(counter, "revision", 0)
        self._roles: dict[str, int] = {}
        self._revision = 0  # goes up whenever cached counts were dropped
        loads_slowly = all(callable(getattr(counter, n, None)) for n in ("preload", "wait_ready"))
        self._provisional = lazy and loads_slowly and not getattr(counter, "ready", True)

    @property
    def revision(self) -> int:
        """Goes up whenever the counts change meaning (exact tokenizer arrived, recalibration, :meth:`clear`)."""
        self._check_revision()
        return self._revision

    @property
    def provisional(self) -> bool:
        """Whether counts are still UTF-8 byte upper bounds (the exact tokenizer is loading)."""
        if self._provisional:
            self._check_revision()
        return self._provisional

    def preload(self) -> None:
        """Start loading the exact tokenizer on a background thread (when counts are provisional); returns at once.

        Best called when the caller is about to wait anyway (a model call), so that the load competes with nothing.
        """
        if self._provisional:
            self.counter.preload()  # type: ignore[attr-defined]

    def wait_exact(self) -> None:
        """Make counts exact from now on: wait for (or do) the tokenizer load a lazy counter started."""
        if self._provisional:
            self.counter.wait_ready()  # type: ignore[attr-defined]
            self._check_revision()

    def exact_copy(self) -> MessageCounter:
        """A counter that counts as this one does once exact: the same text counter, format and overhead, not lazy.

        Its counts wait for (or do) the tokenizer's load wherever they are asked, and it shares no cache with this
        one: figures a turn records while this counter is provisional are counted with it where they are made
        (off the agent's thread, see ``contextfold.manager._exact_figures``).
        """
        return MessageCounter(self.counter, format=self.format, overhead=self.overhead)

    def _text(self, text: str) -> int:
        if self._provisional:
            return len(text.encode("utf-8", "surrogatepass"))
        return self.counter.count(text)

    # -- public API ---------------------------------------------------------------------------------------------------
    def count_text(self, text: str) -> int:
        """Tokens of bare text, without any message overhead."""
        self._check_revision()
        return self._text(text)

    def count_message(self, message: Message) -> int:
        """Tokens of one message, including its per-message overhead (not the once-per-request reply priming)."""
        self._check_revision()
        key = _count_key(message)
        with self._lock:
            n = self._cache.get(key)
            if n is not None:
                self._cache.move_to_end(key)
                return n
            revision = self._revision
        n = self._count_uncached(message)
        with self._lock:
            if revision == self._revision:  # not a provisional count finished after the exact counts arrived
                self._cache[key] = n
                if len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return n

    def count_each(self, messages: Sequence[Message]) -> list[int]:
        """:meth:`count_message` of each message, in order: the cache read in passes of a few hundred messages.

        What a bulk add and the view's settling do for every message of a 100,000-message history (issue 22): the
        revision check once and the lock once per chunk, not per message. Not once per pass: the telemetry thread
        counts a first call's figures with the manager's counter, and the agent's own counts waited on its whole pass
        (~20-50 ms on 100,000 messages). A pass that meets a change of revision (between two chunks, or while it
        counts what it did not find) starts again, so that its counts never mix byte bounds with exact ones.
        """
        if type(self).count_message is not MessageCounter.count_message:  # (a subclass counts its own way)
            return [self.count_message(m) for m in messages]
        while True:
            self._check_revision()
            revision = self._revision
            counts = self._read_cached(messages, revision)
            if counts is not None:
                return counts

    def _read_cached(self, messages: Sequence[Message], revision: int) -> list[int] | None:
        """count_each's pass at ``revision``; None when the counts changed meaning during it."""
        cache, lock = self._cache, self._lock
        out: list[int] = []
        missing: list[int] = []
        # Copies given only an id (``Message._origin``) count as their origin: a repeated history's copies are read
        # once per origin, not keyed and looked up one by one (a bulk add counts each message twice, issue 22).
        by_origin: dict[int, int] = {}  # id(origin) -> its count, or _UNCOUNTED while it waits for the tokenizer
        get, touch, known = cache.get, cache.move_to_end, by_origin.get
        for start in range(0, len(messages), _CHUNK):
            with lock:
                if self._revision != revision:
                    return None
                for m in messages[start:start + _CHUNK]:
                    origin = m._origin
                    if origin is not None:
                        n = known(id(origin))
                        if n is not None:
                            if n == _UNCOUNTED:
                                missing.append(len(out))
                            out.append(n)
                            continue
                    key = _count_key(m)
                    n = get(key)
                    if n is None:
                        missing.append(len(out))
                        out.append(_UNCOUNTED)
                    else:
                        touch(key)
                        out.append(n)
                    if origin is not None:
                        by_origin[id(origin)] = _UNCOUNTED if n is None else n
        for i in missing:
            m = messages[i]
            origin = m._origin
            if origin is None:
                out[i] = self.count_message(m)
                continue
            n = by_origin[id(origin)]
            if n == _UNCOUNTED:  # (the first copy of its origin in this batch: counted, and cached for the next call)
                n = by_origin[id(origin)] = self.count_message(m)
            out[i] = n
        if missing and self._revision != revision:  # (counted in part after the change: the cache holds those now)
            return None
        return out

    def count_messages(self, messages: Iterable[Message], *, reply_priming: bool = True) -> int:
        """Tokens of a request's messages: each message, plus the reply priming once when there are any."""
        total = 0
        seen = False
        for m in messages:
            total += self.count_message(m)
            seen = True
        if seen and reply_priming:
            total += self.overhead.reply_priming
        return total

    def count_tools(self, tools: Sequence[Mapping[str, Any]]) -> int:
        """Tokens of tool schemas sent with a request (0 when there are none)."""
        if not tools:
            return 0
        self._check_revision()
        total = TOOLS_PREAMBLE_TOKENS
        for tool in tools:
            text = json.dumps(tool, ensure_ascii=False, separators=(",", ":"), sort_keys=True, default=str)
            total += PER_TOOL_TOKENS + self._text(text)
        return total

    def ensure_capacity(self, messages: int) -> None:
        """Grow the cache to hold at least ``messages`` counts, with a quarter to spare (it never shrinks).

        A manager whose view outgrows the cache would count its whole view anew on every pass over it: the least
        recently used entries are exactly the ones the next pass needs first.
        """
        wanted = messages + messages // 4
        if wanted > self.cache_size:
            with self._lock:
                self.cache_size = max(self.cache_size, wanted)

    def cache_info(self) -> tuple[int, int]:
        """``(entries, capacity)`` of the per-message cache."""
        return len(self._cache), self.cache_size

    def clear(self) -> None:
        """Forget every cached count (:attr:`revision` goes up)."""
        with self._lock:
            self._forget()

    # -- internals ----------------------------------------------------------------------------------------------------
    def _forget(self) -> None:
        self._cache.clear()
        self._roles.clear()
        self._revision += 1

    def _check_revision(self) -> None:
        # Under the lock, one thread forgets once: two threads clearing for one change dropped the counts one of them
        # made in between (a manager's whole view counted again on its next call), and a count read between the flip
        # and the clearing was a byte bound.
        if self._provisional and getattr(self.counter, "ready", True):
            with self._lock:
                if self._provisional:
                    self._provisional = False  # the exact tokenizer arrived: no byte bound may outlive this point
                    self._forget()
        revision = getattr(self.counter, "revision", 0)
        if revision != self._counter_revision:
            with self._lock:
                if revision != self._counter_revision:
                    self._forget()
                    self._counter_revision = revision

    def _role_tokens(self, role: str) -> int:
        n = self._roles.get(role)
        if n is None:
            revision = self._revision
            n = self._text(role)
            with self._lock:
                if revision == self._revision:  # (as count_message: not a byte bound counted before the exact counts)
                    self._roles[role] = n
        return n

    def _count_uncached(self, message: Message) -> int:
        oh = self.overhead
        n = oh.per_message
        if oh.count_role:
            n += self._role_tokens(message.role)
        if message.name:
            n += oh.per_name + self._text(message.name)
        if isinstance(message.content, str):
            n += self._text(message.content)
        else:
            n += sum(self._count_part(p) for p in message.content)
        for call in message.tool_calls:
            # (a call with extras may be a custom tool's, counted on the text it sends: sent_arguments)
            n += oh.per_tool_call + self._text(call.name) + self._text(sent_arguments(call) if call.extra
                                                                        else call.arguments)
        return n

    def _count_part(self, part: Part) -> int:
        if isinstance(part, TextPart):
            return self._text(part.text)
        if isinstance(part, ThinkingPart):
            n = self._text(part.text)
            if not part.text and part.encrypted:
                n += math.ceil(len(part.encrypted) / ENCRYPTED_CHARS_PER_TOKEN)
            return n
        if isinstance(part, ImagePart):
            return IMAGE_TOKENS_LOW if part.detail == "low" else IMAGE_TOKENS_HIGH
        if isinstance(part, DocumentPart):
            readable = part.data is not None and (part.media_type or "").startswith("text/")
            return self._text(part.data or "") if readable else DOCUMENT_TOKENS
        if is_compaction(part):
            # A compaction item is billed as the summary it holds: Anthropic's readable content, OpenAI's encrypted
            # blob (base64 of it, like encrypted reasoning). The provider's next usage report grounds the estimate.
            content, encrypted = part.data.get("content"), part.data.get("encrypted_content")
            n = self._text(content) if isinstance(content, str) else 0
            if isinstance(encrypted, str) and n == 0:
                n += math.ceil(len(encrypted) / ENCRYPTED_CHARS_PER_TOKEN)
            return n
        return self._text(json.dumps(dict(part.data), ensure_ascii=False, default=str))


# What count_each holds for a message still to be counted (no count is negative).
_UNCOUNTED = -1

# Messages count_each reads from the cache under one hold of the lock: the other thread's count waits at most this.
_CHUNK = 512


def _count_key(message: Message) -> Hashable:
    """What a message's count depends on, as a cache key (ids and ``meta`` do not change a count).

    For text content, its hash and length (as in :mod:`contextfold._memo`) instead of the fingerprint, whose canonical
    JSON of the whole text was three quarters of counting a bulk add's messages (issue 22).
    """
    content = message.content
    calls = message.tool_calls
    if type(content) is not str:
        if calls and any(c.extra for c in calls):  # (the fingerprint leaves extras out: a custom call's mark too)
            return message.fingerprint(), tuple([sent_arguments(c) for c in calls])
        return message.fingerprint()
    # (Shaped by the number of calls, each shape its own tuple length: a generator per key was half of counting a
    # message found in the cache, which every stage of a 100,000-message bulk does.)
    if not calls:
        return (message.role, message.name, hash(content), len(content))
    if len(calls) == 1:
        call = calls[0]
        # (what is counted: a custom tool's text, which a function call with the same JSON arguments does not send)
        arguments = sent_arguments(call) if call.extra else call.arguments
        return (message.role, message.name, hash(content), len(content), call.name, hash(arguments), len(arguments))
    if any(c.extra for c in calls):
        sent = [sent_arguments(c) for c in calls]
        return (message.role, message.name, hash(content), len(content),
                tuple([(c.name, hash(a), len(a)) for c, a in zip(calls, sent, strict=True)]))
    return (message.role, message.name, hash(content), len(content),
            tuple([(c.name, hash(c.arguments), len(c.arguments)) for c in calls]))


# ---- choosing a counter for a model ---------------------------------------------------------------------------------

def counter_for_model(model: str, *, format: str | None = None, lazy: bool = False) -> MessageCounter:
    """A message counter for ``model``: exact for OpenAI models, an estimate (by provider) otherwise.

    The registry's tokenizer is used when it knows the model; an unknown name never raises here, it falls back
    to the default estimate. ``format`` picks the per-message overhead (default: the provider's own format).
    ``lazy`` loads an exact tokenizer on a background thread, counting byte upper bounds meanwhile (see
    :class:`MessageCounter`).
    """
    info = lookup_model(model, with_prices=False)
    tokenizer = info.tokenizer if info is not None else encoding_for_model(model)
    provider = info.provider if info is not None else guess_provider(model)
    counter: TokenCounter
    if tokenizer is not None and tokenizer in _ENCODING_SPECS:
        counter = TiktokenCounter(tokenizer)
    else:
        counter = EstimatingCounter.for_provider(provider)
    if format is None:
        format = {"anthropic": "anthropic", "google": "gemini"}.get(provider, "openai_chat")
    return MessageCounter(counter, format=format, lazy=lazy)
