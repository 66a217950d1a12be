"""Observation masking: replace the oldest tool outputs by their ref when tool outputs take too much of the view.

Masking is the first line of defence against a full context (as good as LLM summarization in published results,
at a fraction of the cost). It is pure over the message list and the cache: every output is stored before it is
masked, so nothing is lost; the placeholder keeps ``tool_call_id`` (pair integrity) and the ref.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Collection, Hashable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, NamedTuple, Protocol

from ..answered import answered_indices
from ..errors import InvalidHistory
from ..messages import Message
from ..pairing import ToolPair, pair_list
from ._digest import Material, digest_material, output_digest, ref_material
from ._light_digest import light_digest
from .refs import ref_id_for

if TYPE_CHECKING:
    from ..tokens import MessageCounter, TokenCounter
    from ._view import SecretGuard
    from .refs import ToolOutputRef

__all__ = [
    "DEFAULT_CLEAR_AT_LEAST",
    "DEFAULT_KEEP_TOOL_IO_PAIRS",
    "DIGEST_KINDS",
    "MaskResult",
    "PlaceholderMemo",
    "mask_tool_outputs",
    "masked_placeholder",
    "placeholder_ahead",
    "tool_output_tokens",
]

# The last three call/result pairs are what the agent is acting on right now; masking them would make it redo work.
DEFAULT_KEEP_TOOL_IO_PAIRS = 3
# Freeing less than this per masking pass would invalidate the provider's cached prefix every turn for little gain
# (Anthropic's context editing defaults to clearing at least this much, for the same reason).
DEFAULT_CLEAR_AT_LEAST = 5_000
# Tool-call arguments shorter than this are left alone when clearing inputs: the placeholder would not be shorter.
MIN_CLEARABLE_ARGUMENT_BYTES = 200
# What a placeholder's digest lists: "full" ranks every candidate by kind and mentions (cache/_digest.py), "light"
# lists the entities by kind as first seen, counted and checked for secrets at once (cache/_light_digest.py).
DIGEST_KINDS = ("full", "light")


class OutputStore(Protocol):
    """What masking needs of the cache (:class:`~contextfold.cache.ToolOutputCache` has it): store, look up, read."""

    def put(self, text: str | bytes) -> ToolOutputRef: ...

    def contains(self, ref_id: str) -> bool: ...

    def get(self, ref_id: str) -> str: ...


# Every ref id has this length, so this placeholder costs what any real one does.
_PLACEHOLDER_SHAPE = "[tool output trimmed; ref=tout_0000000000000000]"

# The state of a placeholder built ahead that nothing the session's secrets answer went into (a light digest of an
# output too long to read lists nothing): it stands whatever they learn later.
_READS_NO_SECRETS: Hashable = ("reads no secrets",)


def masked_placeholder(ref_id: str, digest: str = "", *, partial: bool = False) -> str:
    """What a masked tool output reads like in the context (with the digest of what it replaces, when given).

    ``partial``: the digest was read from the output's first and last lines only (a long output), and says so.
    """
    if digest:
        read = "its first and last lines" if partial else "it"
        return f"[tool output trimmed; ref={ref_id}; {read} mentioned: {digest}]"
    return f"[tool output trimmed; ref={ref_id}]"


@dataclass(frozen=True, slots=True)
class MaskResult:
    """The view after masking and what it cost.

    Attributes:
        messages: The new view (same length and order as the input).
        masked_indices: Indices of the tool results replaced by placeholders, ascending.
        tokens_freed: Tokens the view lost (outputs and, when cleared, tool-call inputs).
        prefix_tokens_invalidated: Tokens of the input from the first changed message on: the part of a provider's
            cached prompt prefix this masking invalidates (0 when nothing changed).
        tool_output_tokens: Tool-output tokens left in the view.
        changed_indices: Indices of every message replaced, ascending: the masked results and, when tool-call
            inputs are cleared, the calls whose arguments were.
    """

    messages: list[Message]
    masked_indices: tuple[int, ...] = ()
    tokens_freed: int = 0
    prefix_tokens_invalidated: int = 0
    tool_output_tokens: int = 0
    changed_indices: tuple[int, ...] = ()


def tool_output_tokens(messages: Sequence[Message], counter: MessageCounter) -> int:
    """Tokens of the tool results in ``messages`` (what the tool-output budget limits)."""
    return sum(counter.count_message(m) for m in messages if m.role == "tool")


def mask_tool_outputs(
    messages: Sequence[Message],
    *,
    budget_tokens: int,
    counter: MessageCounter,
    cache: OutputStore,
    keep_tool_io_pairs: int = DEFAULT_KEEP_TOOL_IO_PAIRS,
    exclude_tools: Collection[str] = (),
    clear_at_least: int = DEFAULT_CLEAR_AT_LEAST,
    clear_tool_inputs: bool = False,
    digest_tokens: int = 0,
    digest_kind: str = "full",
    secrets: SecretGuard | None = None,
    first: Sequence[int] = (),
    exempt: Collection[int] = (),
    pairs: Sequence[ToolPair] | None = None,
    counts: Sequence[int] | None = None,
) -> MaskResult:
    """Mask the oldest eligible tool outputs until tool-output tokens are within ``budget_tokens``.

    Nothing happens while the tool outputs fit. Otherwise the oldest eligible outputs are replaced, in order, until
    the tokens freed cover both the excess and ``clear_at_least`` (so the cached prefix breaks rarely, in big
    steps). Eligible: a tool result with text content that is not already masked, not ``protected``, not the
    output of a tool named in ``exclude_tools`` (the name comes from the paired call), and not among the last
    ``keep_tool_io_pairs`` results. Each output is put in ``cache`` before it is masked (a truncated output already
    is, under its ``ref``). With ``clear_tool_inputs``, the arguments of the masked outputs' calls are stored and
    replaced too. With ``digest_tokens``, each placeholder keeps a digest of that many tokens at most: the names,
    ids and numbers of the output most likely needed again (:func:`~contextfold.output_digest.output_digest`),
    none of which holds one of ``secrets`` (the session's) or a piece of one: a digest never lists a value bare.
    ``digest_kind``: one of :data:`DIGEST_KINDS` (``"light"``: :func:`~contextfold.cache._light_digest.light_digest`).
    ``first`` and ``exempt`` carry an ordering decided elsewhere (:func:`contextfold.steering.mask_order`): the
    eligible results in ``first`` go before any other, in that order; the results in ``exempt`` are never masked.
    Neither makes a result eligible that is not (the answered ones, the last ``keep_tool_io_pairs``, protected or
    non-text results). ``pairs`` (``pair_list(messages)``) and ``counts`` (each message's
    ``counter.count_message``) may be given by a caller that keeps them (the manager's view does, issue 22): then
    neither is derived again.

    Raises:
        InvalidHistory: a message that is not a ``Message``.
        ValueError: a negative budget, keep count or batch size, or an unknown ``digest_kind``.
    """
    for name, value in (
        ("budget_tokens", budget_tokens),
        ("keep_tool_io_pairs", keep_tool_io_pairs),
        ("clear_at_least", clear_at_least),
        ("digest_tokens", digest_tokens),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"mask_tool_outputs: {name} must be an integer >= 0, got {value!r}")
    if digest_kind not in DIGEST_KINDS:
        raise ValueError(f"mask_tool_outputs: digest_kind must be one of {', '.join(DIGEST_KINDS)}, "
                         f"got {digest_kind!r}")
    for i, m in enumerate(messages):
        if not isinstance(m, Message):
            raise InvalidHistory(f"expected a Message, got {type(m).__name__}", index=i)
    view = list(messages)
    if counts is not None and len(counts) != len(view):
        raise ValueError(f"mask_tool_outputs: counts has {len(counts)} entries for {len(view)} messages")
    if counts is None:
        total = tool_output_tokens(view, counter)
    else:
        total = sum(n for m, n in zip(view, counts, strict=True) if m.role == "tool")
    if total <= budget_tokens:
        return MaskResult(view, tool_output_tokens=total)
    if counts is None:
        counts = [counter.count_message(m) for m in view]

    # Paired once: masking changes contents and arguments, never which result answers which call.
    pairs = pair_list(view) if pairs is None else pairs
    candidates = _eligible(view, keep_tool_io_pairs, frozenset(exclude_tools), counter, digest_tokens,
                           first, frozenset(exempt), pairs, counts)
    target = max(total - budget_tokens, clear_at_least)
    freed = 0
    masked: list[int] = []
    # (The calls' arguments of the outputs a batch takes only: not of every pair of the view, issue 22.)
    by_result = {p.result_index: p for p in pairs if p.result_index is not None} if digest_tokens else {}
    after: dict[int, int] = {}  # each masked output's tokens as a placeholder
    for i in candidates:
        if freed >= target:
            break
        known = _arguments_of(view, by_result.get(i)) if digest_tokens else ""
        replacement = _mask_one(view[i], cache, digest_tokens, known, counter, secrets, digest_kind)
        after[i] = counter.count_message(replacement)
        freed += counts[i] - after[i]
        view[i] = replacement
        masked.append(i)
    if not masked:
        return MaskResult(view, tool_output_tokens=total)

    changed = set(masked)
    if clear_tool_inputs:
        changed |= _clear_inputs(view, masked, cache, pairs)
    first_changed = min(changed)
    # (count_messages: each message, then the reply priming once)
    invalidated = sum(counts[first_changed:]) + counter.overhead.reply_priming
    # Only the changed messages differ (the rest are the same objects): the view is not counted again, twice.
    freed_all = sum(counts[i] - (after[i] if i in after else counter.count_message(view[i])) for i in changed)
    return MaskResult(view, tuple(sorted(masked)), freed_all, invalidated, total - freed, tuple(sorted(changed)))


def _eligible(view: Sequence[Message], keep: int, exclude: frozenset[str], counter: MessageCounter,
              digest_tokens: int = 0, first: Sequence[int] = (), exempt: frozenset[int] = frozenset(),
              pairs: Sequence[ToolPair] | None = None, counts: Sequence[int] | None = None) -> list[int]:
    """Indices of maskable tool results: those in ``first`` in its order, then the others oldest first."""
    pairs = pair_list(view) if pairs is None else pairs
    results = [i for i, m in enumerate(view) if m.role == "tool"]
    recent = set(results[max(0, len(results) - keep) :]) if keep else set()
    # The results the model is answering stay whatever ``keep`` says (keep=0 included).
    recent.update(answered_indices(view, pairs))
    ahead = [i for i in dict.fromkeys(first) if 0 <= i < len(view) and view[i].role == "tool"]
    ahead_set = set(ahead)
    names = _call_names(pairs) if exclude else {}
    # A placeholder's tokens depend on the result's name only (role and content are the same for all).
    placeholder_tokens: dict[str | None, int] = {}
    out = []
    for i in [*ahead, *(i for i in results if i not in ahead_set)]:
        m = view[i]
        if i in recent or i in exempt:
            continue
        if m.protected or m.kind == "masked" or _text_of(m) is None:
            continue
        if exclude and (names.get(i) or m.name) in exclude:
            continue
        # An output no longer than its placeholder would cost tokens to mask (ref ids all have the same length).
        shape = placeholder_tokens.get(m.name)
        if shape is None:
            shape = placeholder_tokens[m.name] = counter.count_message(m.with_content(_PLACEHOLDER_SHAPE))
        if (counter.count_message(m) if counts is None else counts[i]) <= shape + digest_tokens:
            continue
        out.append(i)
    return out


def _call_names(pairs: Sequence[ToolPair]) -> dict[int, str]:
    """Tool name of each paired result, from the call that asked for it."""
    return {p.result_index: p.name for p in pairs if p.result_index is not None}


def _arguments_of(view: Sequence[Message], pair: ToolPair | None) -> str:
    """Arguments of the call ``pair`` names (what stays in view beside its result's placeholder); "" without one."""
    if pair is None:
        return ""
    call = next((c for c in view[pair.call_index].tool_calls if c.id == pair.call_id), None)
    return call.arguments if call is not None else ""


def _text_of(message: Message) -> str | None:
    if isinstance(message.content, str):
        return message.content
    # Images and documents in a result cannot be stored as text without loss: such results are never masked.
    if all(p.type == "text" for p in message.content):
        return message.text
    return None


def _memo_key(ref_id: str, known: str, digest_tokens: int, counter: TokenCounter, kind: str) -> Hashable:
    """A placeholder's key in :class:`PlaceholderMemo` (the full digest's without its kind, as before a light one)."""
    if kind == "full":
        return (ref_id, known, digest_tokens, id(counter))
    return (ref_id, known, digest_tokens, id(counter), kind)


def _mask_one(message: Message, cache: OutputStore, digest_tokens: int = 0, known: str = "",
              counter: MessageCounter | None = None, secrets: SecretGuard | None = None,
              digest_kind: str = "full") -> Message:
    ref_id = message.meta.get("ref")
    if not (isinstance(ref_id, str) and cache.contains(ref_id)):
        text = _text_of(message)
        assert text is not None  # _eligible only admits text results
        ref = cache.put(text)
        ref_id = ref.id
        extra_meta = {"original_bytes": ref.byte_size}
    else:
        text = None
        extra_meta = {}
    if digest_tokens and counter is not None:
        memo: PlaceholderMemo | None = getattr(cache, "placeholders", None)
        key = _memo_key(ref_id, known, digest_tokens, counter.counter, digest_kind)
        built = memo.get(key) if memo is not None else None
        # Built ahead whole for this very message (issue 22): the masked message the lines below would make, while
        # the secrets answer as they did then and the output went where it was to go.
        stored = extra_meta.get("original_bytes")
        if (built is not None and built.masked is not None and built.masked[0]() is message
                and built.masked[2] == stored and (built.state is _READS_NO_SECRETS or built.state == (
                    secrets.digest_state() if secrets is not None else None))):
            return built.masked[1]
        placeholder = _digested(ref_id, text, cache, digest_tokens, known, counter.counter, secrets,
                                kind=digest_kind)
        built = memo.get(key) if built is not None and memo is not None else None
        if (built is not None and built.masked is not None and built.masked[0]() is message
                and built.masked[2] == stored and built.masked[1].content is placeholder):
            return built.masked[1]  # (the placeholder built ahead still holds: checked against what was learned)
    else:
        placeholder = masked_placeholder(ref_id)
    return message.with_content_and_meta(placeholder, kind="masked", ref=ref_id, **extra_meta)


def _digested(ref_id: str, text: str | None, cache: OutputStore, digest_tokens: int, known: str,
              counter: TokenCounter, secrets: SecretGuard | None, read: tuple[Material, Hashable] | None = None, *,
              kind: str = "full") -> str:
    """The placeholder of the output stored under ``ref_id`` (``text``: the output in hand, not stored yet).

    Built ahead by :func:`placeholder_ahead` when the session's secrets answer as they did then: looked up, not built.
    ``read``: the digest material of ``text`` blanked, and the secrets' state it was blanked at, when the caller
    has it (used at that state only). ``kind``: the digest's (:data:`DIGEST_KINDS`).
    """
    memo: PlaceholderMemo | None = getattr(cache, "placeholders", None)
    key = _memo_key(ref_id, known, digest_tokens, counter, kind)
    state = secrets.digest_state() if secrets is not None else None
    if memo is not None:
        built = memo.get(key)
        if built is not None and (built.state == state or built.state is _READS_NO_SECRETS
                                  or _still_holds(built, secrets, ref_id, text, cache)):
            if built.state != state and built.state is not _READS_NO_SECRETS:
                memo.put(key, built._replace(state=state))  # (checked once: the next look-up is a plain hit)
            return built.placeholder
    if kind == "light":
        return _light_placeholder(ref_id, text, cache, digest_tokens, known, counter, secrets, memo, key, state)
    # The whole output, not its write-time view: what the view cut is exactly what the digest can bring back.
    # Its material was read when the output was added (issue 22): the stored output is read again only if not.
    # With the session's secrets, an output is read with them blanked (in hand or stored), and its items are
    # shown only when they hold no secret and no piece of one: a digest never lists a value bare.
    if text is not None and read is not None and read[1] == state:
        material = read[0]  # (blanked and read at this very state: what the next line would do again)
    elif text is not None:
        material = digest_material(secrets.blank(text) if secrets is not None else text)
    else:
        material = ref_material(ref_id, lambda: cache.get(ref_id), secrets.blank if secrets is not None else None,
                                state=state)
    asked: list[str] = []  # (the words whose answers made the digest: what a secret learned later is checked against)
    allow = None
    if secrets is not None:
        guard = secrets

        def allow(item: str) -> bool:
            asked.append(item)
            return not guard.mentions_secret(item)

    digest = output_digest("", budget_tokens=digest_tokens, counter=counter, known=known,
                           material=material.items, allow=allow)
    placeholder = masked_placeholder(ref_id, digest, partial=material.partial)
    if memo is not None and (secrets is None or secrets.digest_state() == state):
        memo.put(key, Built(placeholder, state, tuple(asked)))  # (not when a secret was learned meanwhile)
    return placeholder


def _light_placeholder(ref_id: str, text: str | None, cache: OutputStore, digest_tokens: int, known: str,
                       counter: TokenCounter, secrets: SecretGuard | None, memo: PlaceholderMemo | None,
                       key: Hashable, state: Hashable) -> str:
    """:func:`_digested` with a light digest: read from the same whole output, blanked alike; remembered alike."""
    whole = text if text is not None else cache.get(ref_id)
    digest = light_digest(whole, budget_tokens=digest_tokens, counter=counter, known=known,
                          mentions_secret=secrets.mentions_secret if secrets is not None else None,
                          blank=secrets.blank if secrets is not None else None,
                          learn=secrets.learn_text if secrets is not None else None)
    placeholder = masked_placeholder(ref_id, digest.text, partial=digest.partial)
    if memo is not None and digest.partial and not digest.text:
        # An output too long to read lists nothing: what the session learns later cannot change its placeholder, so
        # it is never checked or built again for a secret (issue 22: such a check read the stored output back and
        # searched it, and a learned value found there had the turn blank the whole output again to rebuild it).
        # Decided on the text, not on ``partial`` alone, which also meant "listed from its first and last lines".
        memo.put(key, Built(placeholder, _READS_NO_SECRETS, digest.asked))
    elif memo is not None and (secrets is None or secrets.digest_state() == state):
        memo.put(key, Built(placeholder, state, digest.asked))  # (not when a secret was learned meanwhile)
    return placeholder


def _still_holds(built: Built, secrets: SecretGuard | None, ref_id: str, text: str | None,
                 cache: OutputStore) -> bool:
    """Whether ``built``, a placeholder built before the session learned a secret, is the one it would build now.

    Only when none of the secrets learned since occurs in the output or touches a word its digest asked about
    (:meth:`~contextfold.redact.Redactor.holds_since`); a guard that cannot tell has it built again.
    """
    holds_since = getattr(secrets, "holds_since", None)
    if holds_since is None:
        return False
    if text is None:
        from ..errors import ContextfoldError

        try:
            text = cache.get(ref_id)
        except ContextfoldError:
            return False  # (built again, as before: the build meets the same error)
    return bool(holds_since(built.state, text, built.asked))


class Built(NamedTuple):
    """A placeholder built, the secrets' state it was built at, and the words its digest asked the secrets about.

    ``state`` is :data:`_READS_NO_SECRETS` for a placeholder no answer of the secrets went into.

    ``masked``: the output message it was built for (a weak reference: the memo never keeps an output the view no
    longer holds, and an id reused by a new message cannot match), that message masked (the placeholder in its
    place, its kind, ref and the stored size in its meta) and that size (None: the output was stored already, and
    its meta has none added), when the read-ahead built it (see :func:`placeholder_ahead`).
    """

    placeholder: str
    state: Hashable
    asked: tuple[str, ...]
    masked: tuple[weakref.ref[Message], Message, int | None] | None = None


class PlaceholderMemo:
    """The placeholders built ahead for one session's outputs, by ref, known arguments, budget and counter.

    A masking turn used to build each placeholder (its digest's items weighed, checked for secrets, counted) and
    count it: ~1 ms of a heavy masking turn (issue 22). The read-ahead builds and counts them instead
    (:func:`placeholder_ahead`); the turn looks them up. Each is kept with the secrets' state it was built at: after
    a secret is learned, it is checked against what was learned since, once. The least recently used go first
    beyond ``max_entries``.
    """

    def __init__(self, max_entries: int = 4096) -> None:
        self.max_entries = max_entries
        self._entries: dict[Hashable, Built] = {}
        # id(output message) -> (a weak reference to it, it masked), built ahead: matched by identity, never kept
        self._masked: dict[int, tuple[weakref.ref[Message], Message]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Hashable) -> Built | None:
        """The placeholder built under ``key``, or None."""
        return self._entries.get(key)

    def masked_for(self, messages: Iterable[Message]) -> list[Message]:
        """The masked messages built ahead for ``messages`` (each given once: taken from here), in their order."""
        out: list[Message] = []
        for m in messages:
            pair = self._masked.pop(id(m), None)
            if pair is not None and pair[0]() is m:
                out.append(pair[1])
        return out

    def put(self, key: Hashable, built: Built) -> None:
        """Remember ``built`` under ``key`` (as the newest)."""
        if built.masked is not None:
            if len(self._masked) >= self.max_entries:
                self._masked.clear()
            output = built.masked[0]()
            if output is not None:
                self._masked[id(output)] = (built.masked[0], built.masked[1])
        entries = self._entries
        entries.pop(key, None)
        entries[key] = built
        while len(entries) > self.max_entries:
            try:
                del entries[next(iter(entries))]  # (dicts keep insertion order: the oldest first)
            except (StopIteration, KeyError, RuntimeError):  # (another thread changed it meanwhile)
                break


def placeholder_ahead(message: Message, cache: OutputStore, *, digest_tokens: int, known: str,
                      counter: TokenCounter, secrets: SecretGuard | None = None,
                      material: tuple[Material, Hashable] | None = None, digest_kind: str = "full") -> str | None:
    """Build the placeholder a masking would put in place of ``message``, and count it (for a background thread).

    The same placeholder :func:`mask_tool_outputs` writes with ``digest_tokens`` and the call's arguments ``known``;
    remembered by the cache (``cache.placeholders``), and its text counted by ``counter`` (which remembers counts):
    the masking turn only assembles the message and finds its count. The ref of an output not stored yet is the
    hash of its text (the output is stored when it is masked, not now). None for a message masking never takes.
    ``material``: the digest material of the message's text with the secrets blanked, and the secrets' state it was
    read at (``digest_state()``), when the caller read it (used for an output not stored, at that state only; a
    light digest reads none). ``digest_kind``: the digest's (:data:`DIGEST_KINDS`).
    """
    text = _text_of(message)
    if message.role != "tool" or text is None or not digest_tokens:
        return None
    ref_id = message.meta.get("ref")
    if isinstance(ref_id, str) and cache.contains(ref_id):
        in_hand = None
    else:
        # (Staged: the masking turn that stores it finds it encoded, hashed and its lines counted.)
        stage = getattr(cache, "stage", None)
        ref_id = stage(text) if stage is not None else ref_id_for(text.encode("utf-8", "surrogatepass"))
        in_hand = text
    placeholder = _digested(ref_id, in_hand, cache, digest_tokens, known, counter, secrets, material,
                            kind=digest_kind)
    counter.count(placeholder)
    _masked_ahead(message, cache, ref_id, _memo_key(ref_id, known, digest_tokens, counter, digest_kind), placeholder,
                  in_hand)
    return placeholder


def _masked_ahead(message: Message, cache: OutputStore, ref_id: str, key: Hashable, placeholder: str,
                  in_hand: str | None) -> None:
    """Keep ``message`` masked with ``placeholder`` (stored under ``ref_id``) beside its memo entry (``key``).

    The masked message is what :func:`_mask_one` makes of ``message`` once the output is stored: the turn that masks
    it swaps it in instead of copying the message (issue 22: a masking turn's cost per output). Not kept when the
    entry is another placeholder's (a secret learned meanwhile), nor for an output in hand whose stored size is
    not known yet (not staged).
    """
    memo: PlaceholderMemo | None = getattr(cache, "placeholders", None)
    built = memo.get(key) if memo is not None else None
    if built is None or built.placeholder is not placeholder or (built.masked is not None
                                                                 and built.masked[0]() is message):
        return
    extra_meta: dict[str, int] = {}
    size: int | None = None
    if in_hand is not None:
        staged_size = getattr(cache, "staged_size", None)
        size = staged_size(in_hand) if staged_size is not None else None
        if size is None:
            return
        extra_meta["original_bytes"] = size
    masked = message.with_content_and_meta(placeholder, kind="masked", ref=ref_id, **extra_meta)
    assert memo is not None
    # (Made field by field: a named tuple's _replace builds a dict and maps over its fields, per output.)
    memo.put(key, Built(built.placeholder, built.state, built.asked, (weakref.ref(message), masked, size)))


def _clear_inputs(view: list[Message], masked: Sequence[int], cache: OutputStore,
                  pairs: Sequence[ToolPair]) -> set[int]:
    """Store and replace the arguments of the calls whose outputs were masked; the changed indices."""
    wanted = {view[i].tool_call_id for i in masked if view[i].tool_call_id is not None}
    changed: set[int] = set()
    for pair in pairs:
        call_id, call_index = pair.call_id, pair.call_index
        if call_id not in wanted:
            continue
        m = view[call_index]
        calls = list(m.tool_calls)
        for k, call in enumerate(calls):
            if call.id != call_id or len(call.arguments.encode()) < MIN_CLEARABLE_ARGUMENT_BYTES:
                continue
            ref = cache.put(call.arguments)
            trimmed = json.dumps({"trimmed": True, "ref": ref.id})
            calls[k] = replace(call, arguments=trimmed)
            view[call_index] = replace(m, tool_calls=tuple(calls))
            m = view[call_index]
            changed.add(call_index)
    return changed
