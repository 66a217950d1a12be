"""The tool output cache: whole outputs in a :class:`~contextfold.cache.BlobStore`, views in the context.

A tool output over the in-context limits is stored whole under a content-addressed ref (``tout_`` + 16 hex digits
of its BLAKE2b hash, so the same output gets the same ref in every run and every process) and the message keeps a
view: long lines cut, head and tail kept, and a note telling the model how to read the rest with the retrieval
tools (:mod:`~contextfold.cache.retrieval`). Masking (:mod:`~contextfold.cache.masking`) replaces old outputs by
their ref.

The cache is part of the pure core: it talks to a ``BlobStore`` it is given and never opens files or sockets.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._lazy import LazyModule
from .._memo import STRING_OVERHEAD_BYTES, TextMemo, text_key
from ..errors import ConfigError, RefNotFound, StoreError
from ..messages import Message, TextPart, ToolCall
from ..tokens import EstimatingCounter, MessageCounter, TokenCounter
from . import retrieval
from ._line_index import build_line_index, count_lines, index_key, stored_line_count
from ._view import SecretGuard, cut_guard, render_view
from .owners import (
    OWNER_INFIX,
    SESSION_USE_PREFIX,
    Retention,
    StoredOutput,
    claim_item,
    delete_output,
    delete_use_as_read,
    load_claims,
    owner_key,
    owner_tag,
    read_claim,
    read_use,
    survey,
    write_claim,
)
from .refs import REF_PATTERN, REF_PREFIX, ToolOutputRef, is_ref_id, ref_id_for

if TYPE_CHECKING:
    from . import masking as _masking
    from .blobs import BlobStore
    from .masking import MaskResult, PlaceholderMemo
else:  # (used by each masking: imported when first used, not with the cache, then no import statement per masking)
    _masking = LazyModule(".masking", __package__)

__all__ = [
    "DEFAULT_MAX_LINE_LENGTH",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "CacheConfig",
    "GcResult",
    "ToolOutputCache",
    "referenced_refs",
]

# 50 KiB: about 12,500 tokens, the most one tool result should take of even a large window (Codex uses 10 KiB
# for command output; file views and test logs need more to stay useful before the model has to page).
DEFAULT_MAX_MESSAGE_BYTES = 50 * 1024
# 2,000 characters per line, as file-reading tools cut lines: longer lines are minified code or data blobs.
DEFAULT_MAX_LINE_LENGTH = 2_000
# The tool-output budget is a quarter of the window (tool outputs are ~75% of an agent's characters, and the
# rest of the conversation needs room) ...
BUDGET_SHARE_OF_WINDOW = 0.25
# ... but never under 20,000 tokens, below which file views stop being useful, ...
MIN_CONTEXT_BUDGET_TOKENS = 20_000
# ... nor over 60,000, past which old observations cost more attention than they give.
MAX_CONTEXT_BUDGET_TOKENS = 60_000
# One output takes at most a quarter of the tool-output budget, so that the last few pairs, which masking never
# touches (3 by default), still fit in the budget together.
MESSAGE_SHARE_OF_BUDGET = 4
# 000 §Decision 3: cut to the cap / 1.2, so that what serializing adds (JSON escaping, the result's envelope) and
# the error of an estimated count do not push the result over the cap.
DEFAULT_SERIALIZATION_BUFFER = 1.2
TRUNCATION_UNITS = ("tokens", "bytes", "none")
# unit="bytes": no token cap at all (any count of tokens passes).
NO_TOKEN_CAP = 1 << 62

# A session's claim on an output is rewritten at most this often (it only has to be fresher than Retention.live_s).
CLAIM_REFRESH_S = 600
# Rendered write-time views kept by ref (issue 22): a bulk add of a long history meets the same outputs again.
VIEW_MEMO_BYTES = 4 << 20
# needs_view's answers remembered (~200 bytes each: ~10,000 texts), for texts at least this long.
NEEDS_MEMO_BYTES = 2 << 20
NEEDS_MEMO_MIN_CHARS = 1_000
@dataclass(frozen=True, slots=True)
class CacheConfig:
    """When a tool output is cut at write time, and how much the view may hold.

    Args:
        enabled: Off leaves every message as it is (masking still works: it stores what it masks).
        context_budget_tokens: Tool-output tokens allowed in the view; None derives it from the window:
            clamp(window × 0.25, 20,000, 60,000).
        max_message_bytes: Bytes one tool result may keep in the context.
        max_line_length: Characters one line may keep in the context.
        max_message_tokens: Tokens one tool result may keep; None means the budget / 4.
        unit: ``"tokens"`` (the token and byte caps apply), ``"bytes"`` (only the byte cap) or ``"none"`` (nothing
            is cut at write time; masking still works) — 000's TOOL_OUTPUT_TRUNCATION_POLICY.
        serialization_buffer: The token cap is divided by this (000's 1.2): the view leaves room for what
            serializing the result adds and for counting error.
        max_message_lines: Lines one tool result may keep (head and tail); None means no line cap.
        header: Put ``Total output lines: X`` before a cut view.
    """

    enabled: bool = True
    context_budget_tokens: int | None = None
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    max_line_length: int = DEFAULT_MAX_LINE_LENGTH
    max_message_tokens: int | None = None
    unit: str = "tokens"
    serialization_buffer: float = DEFAULT_SERIALIZATION_BUFFER
    max_message_lines: int | None = None
    header: bool = False

    def __post_init__(self) -> None:
        for name in ("context_budget_tokens", "max_message_bytes", "max_line_length", "max_message_tokens",
                     "max_message_lines"):
            value = getattr(self, name)
            if value is None and name in ("context_budget_tokens", "max_message_tokens", "max_message_lines"):
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"must be a positive integer, got {value!r}", field=f"cache.{name}")
        if self.unit not in TRUNCATION_UNITS:
            raise ConfigError(f"must be one of {', '.join(TRUNCATION_UNITS)}, got {self.unit!r}", field="cache.unit")
        buffer = self.serialization_buffer
        if isinstance(buffer, bool) or not isinstance(buffer, int | float) or not 1.0 <= buffer <= 4.0:
            raise ConfigError(f"must be a number from 1 to 4, got {buffer!r}", field="cache.serialization_buffer")

    def budget_tokens(self, context_window: int | None = None) -> int:
        """The tool-output token budget for a model with ``context_window`` tokens."""
        if self.context_budget_tokens is not None:
            return self.context_budget_tokens
        if context_window is None:
            return MIN_CONTEXT_BUDGET_TOKENS
        share = int(context_window * BUDGET_SHARE_OF_WINDOW)
        return max(MIN_CONTEXT_BUDGET_TOKENS, min(MAX_CONTEXT_BUDGET_TOKENS, share))

    def message_tokens(self, context_window: int | None = None) -> int:
        """The most tokens one tool result may keep in the view (after the serialization buffer)."""
        if self.unit == "bytes":
            return NO_TOKEN_CAP
        cap = self.max_message_tokens
        if cap is None:
            cap = self.budget_tokens(context_window) // MESSAGE_SHARE_OF_BUDGET
        return max(1, math.floor(cap / self.serialization_buffer))


@dataclass(frozen=True, slots=True)
class GcResult:
    """What a garbage collection removed and what it kept."""

    deleted: tuple[str, ...] = ()
    bytes_freed: int = 0
    bytes_kept: int = 0
    kept: int = 0


class ToolOutputCache:
    r"""Whole tool outputs by ref, their in-context views, masking, retrieval and GC over one blob store.

    Args:
        store: Where outputs live (``contextfold.stores.open_blob_store("local")``, or ``MemoryBlobStore()`` in
            tests). The core never opens one itself.
        config: Limits for write-time caching; see :class:`CacheConfig`.
        counter: Token counter for the per-message token cap (a character estimate when not given).
        context_window: The model's window, from which the token budgets derive when not set explicitly.

    Example:
        >>> from contextfold.stores.memory import MemoryBlobStore
        >>> cache = ToolOutputCache(MemoryBlobStore())
        >>> ref = cache.put("line 1\nline 2\n")
        >>> cache.get(ref.id)
        'line 1\nline 2\n'
    """

    def __init__(
        self,
        store: BlobStore,
        config: CacheConfig | None = None,
        *,
        counter: TokenCounter | None = None,
        context_window: int | None = None,
        session_id: str | None = None,
        retention: Retention | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.config = config or CacheConfig()
        self.counter: TokenCounter = counter or EstimatingCounter()
        self.context_window = context_window
        self.session_id = session_id
        self.retention = retention
        self._clock = clock
        self._tag = owner_tag(session_id)
        # Refs are immutable (content-addressed), so their sizes and line counts can be remembered freely.
        self._refs: dict[str, ToolOutputRef] = {}
        self._claimed: dict[str, float] = {}  # ref id -> when this cache last wrote its claim
        self._owned: set[str] = set()  # refs found claimed by this session in the store (a resumed session's)
        self._new_outputs = 0
        self._lock = threading.Lock()
        # Whether the agent has the retrieval tools: the notes of cut outputs name them only then (an adapter that
        # does not give the agent the tools turns this off, so the model is never told to call a missing tool).
        self.names_retrieval_tools = True
        # The session's redactor, when it has one: views never cut a secret in two, digests never quote one.
        self.secrets: SecretGuard | None = None
        self._losses_seen = 0  # the store's losses() at the last look for lost refs
        self._views: TextMemo[str] = TextMemo(max_bytes=VIEW_MEMO_BYTES)
        # needs_view's answers for long texts, by the text's hash and length and what the answer depends on: a bulk
        # add of a repeated history measured, split and counted each copy of an output again (issue 22).
        self._needs: TextMemo[bool] = TextMemo(max_bytes=NEEDS_MEMO_BYTES)
        self._ref_ids = _RefIds()
        self._placeholders: PlaceholderMemo | None = None

    @property
    def placeholders(self) -> PlaceholderMemo:
        """The masked placeholders built ahead for this session's outputs (see :func:`~.masking.placeholder_ahead`)."""
        memo = self._placeholders
        if memo is None:
            from .masking import PlaceholderMemo

            memo = self._placeholders = PlaceholderMemo()
        return memo

    # -- storing ----------------------------------------------------------------------------------------------
    def stage(self, text: str) -> str:
        """The ref id ``text`` will be stored under; what storing it needs is kept for :meth:`put` (read-ahead).

        Encoding, hashing and counting the lines of an output were most of storing it, in the masking turn that
        stores it (issue 22): the read-ahead stages each output masking may take soon, and :meth:`put` of the same
        text object finds them done. Nothing is written to the store here.
        """
        staged = self._ref_ids.staged(text)
        if staged is not None:
            return staged[0]
        data = _encode(text)
        ref_id = ref_id_for(data)
        self._ref_ids.stage(text, ref_id, data, count_lines(data))
        return ref_id

    def staged_size(self, text: str) -> int | None:
        """The bytes :meth:`put` of ``text`` will store (its ref's ``byte_size``) when it is staged, else None."""
        staged = self._ref_ids.staged(text)
        return None if staged is None else len(staged[1])

    def put(self, text: str | bytes) -> ToolOutputRef:
        """Store a whole output (once: identical outputs share a ref) and return its ref."""
        data = text if isinstance(text, bytes) else None
        staged = self._ref_ids.staged(text, take=True) if isinstance(text, str) else None
        line_count: int | None = None
        ref_id: str | None
        if staged is not None:
            ref_id, data, line_count = staged
            self._ref_ids.put(str(text), ref_id)
        else:
            ref_id = self._ref_ids.get(text) if isinstance(text, str) else None
        if ref_id is None:
            data = data if data is not None else _encode(str(text))
            ref_id = ref_id_for(data)
            if isinstance(text, str):
                self._ref_ids.put(text, ref_id)
        known = self._refs.get(ref_id)
        claim_again = stored = False
        if known is not None:
            # Claimed again (a no-op when recent): a put whose claim failed after the output was written, retried
            # by the caller, must not leave an output this session wrote but does not own (masking would then store
            # its cut view as a new output, and the full text would be lost to restore). Claimed, then touched, then
            # checked: see _claim_stored.
            self._claim(ref_id)
            self.store.touch(ref_id)
            if self.store.exists(ref_id):
                return known
            claim_again = True
        if data is None:
            data = _encode(str(text))
        if line_count is None:
            line_count = count_lines(data)
        claimed_at: float | None = None
        if self.store.size(ref_id) == len(data):
            if self._claim_stored(ref_id, len(data)):
                stored = True
            else:
                claim_again = True
        if not stored:
            writes: list[tuple[str, bytes]] = []
            index = build_line_index(data, line_count)
            if index is not None:
                # The index goes first: a crash in between leaves an orphan index (collected by gc), never an
                # output that cannot be paged.
                writes.append((index_key(ref_id), index))
            writes.append((ref_id, data))
            # Its claim after it, in the same call (one store call and lock for the three, issue 22).
            # Claimed just now and found gone meanwhile (collected): claimed again, however lately, as collection
            # deletes the claims it read after the output (on s20f the output was written again with no claim).
            claimed_at = self._claim_now() if claim_again else self._claim_due(ref_id)
            if claimed_at is not None:
                writes.append(claim_item(ref_id, self._tag, claimed_at))
            put_many = getattr(self.store, "put_many", None)  # (a third party's store may predate it)
            if callable(put_many):
                put_many(writes)
            else:
                for key, value in writes:
                    self.store.put(key, value)
        ref = ToolOutputRef(ref_id, len(data), line_count)
        with self._lock:
            self._refs[ref_id] = ref
            self._new_outputs += 1
            due = self.retention is not None and self._new_outputs % self.retention.every_puts == 0
            if claimed_at is not None:
                self._claimed[ref_id] = claimed_at
        if claimed_at is None:
            self._claim(ref_id)
        if due:
            self.retain()
        return ref

    @property
    def stored_outputs(self) -> int:
        """Outputs this cache has stored since it was made."""
        return self._new_outputs

    def _claim_stored(self, ref_id: str, size: int) -> bool:
        """Claim an output the store holds already (another session's, maybe aged); False when it is gone meanwhile.

        Collection deletes an aged output only if nobody touched it since it listed it (``delete_unused``): the claim
        is written first, then the output touched, then checked. A collection deleting before the touch is seen
        here (False: the caller writes the output again, its claim with it); one deleting after it is refused. Up
        to a9a74c5 the touch came first, then the claim: a collection that had read the claims again before this
        claim deleted the output this session went on to cite.
        """
        self._claim(ref_id)
        self.store.touch(ref_id)
        return self.store.size(ref_id) == size

    # -- ownership --------------------------------------------------------------------------------------------
    def _claim(self, ref_id: str) -> None:
        """Record that this session uses ``ref_id`` (rewritten at most every ``CLAIM_REFRESH_S``).

        A cache without a session claims nothing: its outputs are aged by size (LRU) only.
        """
        now = self._claim_due(ref_id)
        if now is None:
            return
        write_claim(self.store, ref_id, self._tag, now)
        with self._lock:
            self._claimed[ref_id] = now

    def _claim_now(self) -> float | None:
        """The time to claim an output at now whatever its last claim, or None for a cache without a session."""
        return None if self.session_id is None else self._clock()

    def _claim_due(self, ref_id: str) -> float | None:
        """The time to claim ``ref_id`` at now, or None when this cache need not (no session, or claimed lately)."""
        if self.session_id is None:
            return None
        now = self._clock()
        last = self._claimed.get(ref_id)
        if last is not None and now - last < CLAIM_REFRESH_S:
            return None
        return now

    def owns(self, ref_id: str) -> bool:
        """Whether this cache's session has a claim on ``ref_id`` (a cache without a session owns everything)."""
        if self.session_id is None or ref_id in self._claimed or ref_id in self._owned:
            return True
        if read_claim(self.store, ref_id, self._tag) is None:
            return False
        with self._lock:
            self._owned.add(ref_id)  # dropped again by this cache's gc and retention
        return True

    def owned_ref_ids(self) -> list[str]:
        """The refs this cache's session owns, sorted (every ref for a cache without a session).

        From the store's index of claims by session when it keeps one (:meth:`BlobStore.claimed_refs`): a grep over
        all of a session's outputs then costs what the session holds, not what the store holds (issue 22). A store
        without one (a third party's, of an older protocol) is listed whole, as before.
        """
        if self.session_id is None:
            return self.ref_ids()
        claimed_refs = getattr(self.store, "claimed_refs", None)
        claimed = claimed_refs(self._tag) if callable(claimed_refs) else None
        if claimed is None:
            outputs, _ = survey(self.store, is_ref_id)
            suffix = OWNER_INFIX + self._tag
            return sorted(r for r, e in outputs.items() if any(k.endswith(suffix) for k in e.claim_keys))
        # Only ref-shaped names (a claim key is the store's to parse, the ref is ours to check), and only outputs the
        # store still holds (a claim outlives its output when a crash fell between their deletions).
        wanted = sorted({r for r in claimed if is_ref_id(r)})
        missing = getattr(self.store, "missing", None)
        if callable(missing):
            gone = set(missing(wanted)) if wanted else set()
            return [r for r in wanted if r not in gone]
        return [r for r in wanted if self.store.exists(r)]

    def _owned_ref(self, ref_id: str) -> ToolOutputRef:
        """The ref, when this session owns it: another session's output is as unknown as a made-up ref."""
        if not self.owns(ref_id):
            raise RefNotFound(ref_id)
        ref = self.ref(ref_id)
        self._claim(ref_id)
        return ref

    def ref(self, ref_id: str) -> ToolOutputRef:
        """The ref of a cached output; raises ``RefNotFound`` when the store does not hold it."""
        known = self._refs.get(ref_id)
        if known is not None:
            return known
        if not is_ref_id(ref_id):
            raise RefNotFound(ref_id)
        size = self.store.size(ref_id)
        if size is None:
            raise RefNotFound(ref_id)
        line_count = stored_line_count(self.store, ref_id, size)
        ref = ToolOutputRef(ref_id, size, line_count)
        with self._lock:
            self._refs[ref_id] = ref
        return ref

    def get(self, ref_id: str) -> str:
        """The whole output, byte for byte as it was put, when this cache's session owns it.

        Every path that turns a ref into text goes through here (widening the answered output, restoring, searching
        the archive, a placeholder's digest) or through :meth:`read` and :meth:`grep`, which check the same: another
        session's output is as unknown as a made-up ref (``RefNotFound``), whichever message or archive line names it.
        """
        if not is_ref_id(ref_id) or not self.owns(ref_id):
            raise RefNotFound(ref_id)
        return self.store.get(ref_id).decode("utf-8", "surrogatepass")

    def contains(self, ref_id: str) -> bool:
        """Whether the store holds ``ref_id`` for this cache's session (another session's output is not there)."""
        return is_ref_id(ref_id) and self.store.exists(ref_id) and self.owns(ref_id)

    def lost(self, ref_id: str) -> bool:
        """Whether ``ref_id`` is an output this cache stored or read that the store no longer holds.

        A store that forgot it (a Redis restarted without persistence, an evicting cache server): the view may
        still show the ref, and the model is told the output is gone rather than that it made the ref up. Outputs
        this cache deleted itself (gc, retention) are forgotten with them.
        """
        with self._lock:
            known = ref_id in self._refs or ref_id in self._claimed or ref_id in self._owned
        return known and not self.store.exists(ref_id)

    def newly_lost(self, ref_ids: Callable[[], Iterable[str]]) -> set[str]:
        """The refs among ``ref_ids()`` the store lost since the last call: empty, and free, unless it reports a loss.

        Asked before every model call: the store's ``losses()`` counter is read without a round trip; only when it
        moved (a Redis without persistence restarted) are the refs listed (``ref_ids`` is called) and checked, in
        one batched call.
        """
        losses = getattr(self.store, "losses", None)
        if not callable(losses):
            return set()  # a store of an older protocol: a read still says the output is gone
        try:
            seen = losses()
            if seen == self._losses_seen:
                return set()
            wanted = sorted({r for r in ref_ids() if is_ref_id(r)})
            missing = getattr(self.store, "missing", None)
            gone = (set(missing(wanted)) if callable(missing) else {r for r in wanted if not self.store.exists(r)}) \
                if wanted else set()
        except StoreError:
            # The store went away again while we looked: the note is a courtesy, the turn goes on, and the look is
            # taken again at the next call (a read of a lost ref still says it is gone).
            return set()
        self._losses_seen = seen
        return gone

    # -- write-time caching -----------------------------------------------------------------------------------
    def needs_view(self, text: str, *, max_tokens: int | None = None) -> bool:
        """Whether ``text`` is over the in-context limits (bytes, line length or tokens).

        ``max_tokens`` replaces the configured token cap.
        """
        if len(text) < NEEDS_MEMO_MIN_CHARS:
            return self._needs_view(text, max_tokens)
        key = (*text_key(text), max_tokens, self.context_window, self.config, id(self.counter),
               getattr(self.counter, "revision", 0))
        found = self._needs.get(key)
        if found is None:
            found = self._needs_view(text, max_tokens)
            self._needs.put(key, found, 0)
        return found

    def _needs_view(self, text: str, max_tokens: int | None) -> bool:
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > self.config.max_message_bytes:
            return True
        limit = self.config.max_line_length
        if len(text) > limit and max(map(len, text.split("\n"))) > limit:
            return True
        lines = self.config.max_message_lines
        if lines is not None and text.count("\n") >= lines and len(text.rstrip("\n").split("\n")) > lines:
            return True
        token_cap = self.config.message_tokens(self.context_window) if max_tokens is None else max_tokens
        # A token is at least one byte, so only texts longer than the cap in bytes can be over it in tokens.
        return size > token_cap and self.counter.count(text) > token_cap

    def view_for(self, text: str, ref: ToolOutputRef, *, max_tokens: int | None = None) -> str:
        """The in-context view of ``text``: cut lines, head and tail, and a note on how to read the rest.

        ``max_tokens`` replaces the configured per-output cap (a wider view of the output being answered).
        """
        cap = self.config.message_tokens(self.context_window) if max_tokens is None else max_tokens
        # A ref names its content, so the same ref at the same cap renders the same view while the counter, the
        # notes and the secrets it must not cut stay the same (an output that comes back is rendered once).
        key = (ref.id, cap, self.names_retrieval_tools, id(self.counter), self._secrets_state())
        view = self._views.get(key) if key[-1] is not None else None
        if view is None:
            view = self._render(text, ref, cap, header=self.config.header)
            if key[-1] is not None:
                self._views.put(key, view, len(view) + STRING_OVERHEAD_BYTES)
        return view

    def _render(self, text: str, ref: ToolOutputRef, max_tokens: int, *, header: bool = False) -> str:
        """The cut view of ``text`` under ``ref`` at ``max_tokens``, by this cache's limits, notes and secrets."""
        return render_view(
            text,
            ref,
            max_bytes=self.config.max_message_bytes,
            max_tokens=max_tokens,
            max_line_length=self.config.max_line_length,
            counter=self.counter,
            max_lines=self.config.max_message_lines,
            marker_unit="chars" if self.config.unit == "bytes" else "tokens",
            header=header,
            name_tools=self.names_retrieval_tools,
            secrets=self.secrets,
        )

    def _secrets_state(self) -> tuple[int, int] | None:
        """What the secrets guard knows, as far as a view depends on it; None when that cannot be told."""
        if self.secrets is None:
            return (0, 0)
        remembered = getattr(self.secrets, "memory", None)
        try:
            return (id(self.secrets), len(remembered)) if remembered is not None else None
        except TypeError:
            return None

    def process(self, message: Message, *, max_tokens: int | None = None) -> Message:
        """Cache a tool result over the in-context limits and return it with its view; anything else unchanged.

        The returned message keeps ``tool_call_id`` and ``name``; its ``meta`` gains ``ref``, ``kind="truncated"``
        and ``original_bytes``. ``max_tokens`` replaces the configured token cap for this result (a per-tool cap,
        ``policy.tools``), before the serialization buffer like the configured one.
        """
        if (not self.config.enabled or self.config.unit == "none" or message.role != "tool"
                or message.meta.get("ref") is not None):
            return message
        text = _plain_text(message)
        cap = None if max_tokens is None else max(1, math.floor(max_tokens / self.config.serialization_buffer))
        if text is None or not self.needs_view(text, max_tokens=cap):
            return message
        ref = self.put(text)
        view = self.view_for(text, ref, max_tokens=cap)
        return message.with_content(view).with_meta(ref=ref.id, kind="truncated", original_bytes=ref.byte_size)

    def shrink(self, message: Message, max_tokens: int) -> Message:
        """A tool result (or a user request) re-cut to a view of at most about ``max_tokens`` (head, tail, note).

        For the messages the model is answering when they alone would overflow the view: they must stay in it with
        real content (:mod:`contextfold.answered`), so they are cut harder instead of leaving. The whole text is
        cached first (or already is, under the message's ``ref``); protected and non-text messages come back as
        they are.
        """
        if message.role not in ("tool", "user") or message.protected:
            return message
        ref_id = message.meta.get("ref")
        if isinstance(ref_id, str) and self.contains(ref_id):
            text = self.get(ref_id)
            ref = self.ref(ref_id)
        else:
            plain = _plain_text(message)
            if plain is None:
                return message
            text, ref = plain, self.put(plain)
        view = self._render(text, ref, max_tokens)
        if self.counter.count(view) >= self.counter.count(message.text):
            return message
        if message.role == "user":
            # The reading note is written for tool outputs; the same ref reads the user's own text.
            head, sep, note = view.rpartition("\n")
            view = head + sep + note.replace("[tool output ", "[your message ", 1)
        return message.with_content(view).with_meta(ref=ref.id, kind="truncated", original_bytes=ref.byte_size)

    def process_all(self, messages: Iterable[Message]) -> list[Message]:
        """:meth:`process` over a list."""
        return [self.process(m) for m in messages]

    # -- retrieval --------------------------------------------------------------------------------------------
    def read(
        self, ref_id: str, offset: int = 1, limit: int | None = None, *, max_bytes: int | None = None
    ) -> retrieval.ReadResult:
        """Lines ``offset`` .. ``offset + limit - 1`` (1-based) of a cached output, reading only that slice.

        Each line is cut at ``max_line_length``; ``max_bytes`` stops the slice early (see ``next_offset``).
        """
        ref = self._owned_ref(ref_id)
        self.store.touch(ref_id)
        return retrieval.read_lines(
            self.store, ref, offset, limit, max_line_length=self.config.max_line_length, max_bytes=max_bytes,
            guard=cut_guard(self.secrets),
        )

    def grep(
        self, pattern: str, ref_id: str | None = None, *, context: int = 0, max_matches: int | None = None
    ) -> retrieval.GrepResult:
        """Lines matching the regular expression ``pattern`` in one output, or in every output this session owns."""
        refs = [self._owned_ref(ref_id)] if ref_id is not None else [self.ref(k) for k in self.owned_ref_ids()]
        if ref_id is not None:
            self.store.touch(ref_id)
        return retrieval.grep_refs(
            self.store,
            refs,
            pattern,
            context=context,
            max_matches=max_matches,
            max_line_length=self.config.max_line_length,
            guard=cut_guard(self.secrets),
        )

    def ref_ids(self) -> list[str]:
        """Every cached output's ref id, sorted."""
        return [e.key for e in self.store.entries() if is_ref_id(e.key)]

    def execute_tool_call(self, call: ToolCall) -> Message:
        """Answer a retrieval tool call with a tool result; errors become readable results, never exceptions."""
        return retrieval.execute_tool_call(self, call)

    # -- masking ----------------------------------------------------------------------------------------------
    def mask(self, messages: Sequence[Message], *, counter: MessageCounter, **options: Any) -> MaskResult:
        """:func:`contextfold.cache.mask_tool_outputs` with this cache (budget from the config when not given)."""
        options.setdefault("budget_tokens", self.config.budget_tokens(self.context_window))
        if self.secrets is not None:
            options.setdefault("secrets", self.secrets)
        return _masking.mask_tool_outputs(messages, counter=counter, cache=self, **options)

    # -- garbage collection -----------------------------------------------------------------------------------
    def gc(self, referenced: Iterable[str], max_bytes: int | None = None) -> GcResult:
        """Drop this session's claims on outputs no view or archive of it refers to; delete unclaimed outputs.

        An output another session still claims is never deleted: only this session's claim goes. A cache without
        a session collects the whole store (every unreferenced output, whoever claims it).

        Args:
            referenced: Ref ids still in use (see :func:`referenced_refs`); these are never touched.
            max_bytes: None drops every unreferenced claim. A number keeps unreferenced outputs too, evicting the
                least recently used of them until this session's outputs take at most this many bytes.
        """
        if max_bytes is not None and max_bytes < 0:
            raise ValueError(f"gc: max_bytes must be >= 0, got {max_bytes}")
        keep = set(referenced)
        outputs, orphans = survey(self.store, is_ref_id)
        suffix = OWNER_INFIX + self._tag
        mine = {r: e for r, e in outputs.items()
                if self.session_id is None or any(k.endswith(suffix) for k in e.claim_keys)}
        candidates = sorted((e for r, e in mine.items() if r not in keep), key=lambda e: (e.accessed, e.ref_id))
        total = sum(e.size for e in mine.values())
        deleted: list[str] = []
        freed = released = 0
        for entry in candidates:
            if max_bytes is not None and total - freed <= max_bytes:
                break
            released += 1
            others = [k for k in entry.claim_keys if not k.endswith(suffix)]
            if self.session_id is not None and others:
                self.store.delete(owner_key(entry.ref_id, self._tag))  # shared: only our claim goes
            else:
                delete_output(self.store, entry)
                deleted.append(entry.ref_id)
            with self._lock:
                self._refs.pop(entry.ref_id, None)
                self._claimed.pop(entry.ref_id, None)
                self._owned.discard(entry.ref_id)
            freed += entry.size
        for key in orphans:
            self.store.delete(key)
        return GcResult(tuple(deleted), freed, total - freed, len(mine) - released)

    def retain(self, now: float | None = None) -> GcResult:
        """Store-wide retention (see :class:`~contextfold.cache.Retention`); returns what it deleted.

        Outputs unused by every session for ``max_age_s`` go; then, over ``max_bytes``, the least recently used
        (unclaimed first, then by their newest claim), skipping outputs a session used within ``live_s``.
        """
        policy = self.retention or Retention()
        now = self._clock() if now is None else now
        others: list[str] = []
        outputs, orphans = survey(self.store, is_ref_id, others)
        load_claims(self.store, outputs.values())
        if policy.max_age_s is not None:
            self._retain_memories(outputs.values(), others, now, policy.max_age_s)
        deleted: list[str] = []
        freed = 0

        def drop(entry: StoredOutput) -> bool:
            # Only if nobody used it since it was listed: a session claiming it meanwhile (a new one storing the same
            # output, after the claims were read again) touches it after its claim, which refuses this delete.
            nonlocal freed
            if not delete_output(self.store, entry, unused=True):
                return False
            deleted.append(entry.ref_id)
            freed += entry.size
            with self._lock:
                self._refs.pop(entry.ref_id, None)
                self._claimed.pop(entry.ref_id, None)
                self._owned.discard(entry.ref_id)
            return True

        survivors: list[StoredOutput] = []
        for entry in outputs.values():
            last_use = max(entry.claims.values(), default=None)
            if policy.max_age_s is not None and last_use is not None and now - last_use > policy.max_age_s:
                load_claims(self.store, [entry])  # (again: a session may have used it since they were read)
                last_use = max(entry.claims.values(), default=None)
            if not (policy.max_age_s is not None and last_use is not None and now - last_use > policy.max_age_s
                    and drop(entry)):
                survivors.append(entry)
        total = sum(e.size for e in survivors)
        if policy.max_bytes is not None and total > policy.max_bytes:
            # Unclaimed outputs (written before claims existed) first, by LRU; then the longest unused.
            survivors.sort(key=lambda e: (bool(e.claims), max(e.claims.values(), default=0.0), e.accessed))
            for entry in survivors:
                if total - freed <= policy.max_bytes:
                    break
                if entry.claims and now - max(entry.claims.values()) <= policy.live_s:
                    continue  # some session is using it
                drop(entry)
        for key in orphans:
            self.store.delete(key)
        kept = len(outputs) - len(deleted)
        return GcResult(tuple(deleted), freed, sum(e.size for e in outputs.values()) - freed, kept)

    def _retain_memories(self, outputs: Iterable[StoredOutput], keys: list[str], now: float, max_age_s: float) -> None:
        """Delete the secret memories of sessions unused for ``max_age_s``, as their outputs go (issue 21).

        A memory holds its session's secrets in clear, as the outputs they came from do: it must not outlive them.
        A session's last use is its newest claim on any output or the use it noted (``owners.write_use``: a live
        session that cites no output claims none), or the memory's own last save when that is newer (read only when
        neither shows a recent use). A memory with none of them is kept: its age is unknown. A use note goes once it
        is past the age itself.
        """
        from ..manager._limits import SESSION_LIMIT_KEY_PREFIX, limit_saved_at
        from ..redact._memory_records import memory_groups
        from ..redact.memory import MEMORY_KEY_PREFIX, memory_saved_at

        last_use: dict[str, float] = {}
        for entry in outputs:
            for tag, when in entry.claims.items():
                last_use[tag] = max(when, last_use.get(tag, when))
        noted = [key for key in keys if key.startswith(SESSION_USE_PREFIX)]
        for key in noted:
            noted_at = read_use(self.store, key)
            tag = key[len(SESSION_USE_PREFIX):]
            if noted_at is not None:
                last_use[tag] = max(noted_at, last_use.get(tag, noted_at))
        # A memory is its base and the records appended after it (<prefix><tag>.<n>): aged and deleted together.
        groups: list[tuple[str, list[str], Callable[[Any, str], float | None]]] = [
            (tag, group, memory_saved_at) for tag, group in memory_groups(keys, MEMORY_KEY_PREFIX).items()]
        # (a session's own learned limit goes with it too: session-limit.<tag>:<model>)
        groups += [(key[len(SESSION_LIMIT_KEY_PREFIX):].partition(":")[0], [key], limit_saved_at)
                   for key in keys if key.startswith(SESSION_LIMIT_KEY_PREFIX)]
        groups += [(key[len(SESSION_USE_PREFIX):], [key], read_use) for key in noted]
        for tag, group, saved_at in groups:
            used = last_use.get(tag)
            if used is not None and now - used <= max_age_s:
                continue
            saved = [t for t in (saved_at(self.store, key) for key in group) if t is not None]
            known = [t for t in (used, max(saved, default=None)) if t is not None]
            if known and now - max(known) > max_age_s:
                if saved_at is read_use and saved:  # (a use note: deleted only while it holds the time read)
                    delete_use_as_read(self.store, group[0], max(saved))
                    continue
                for key in group:
                    self.store.delete(key)

    def close(self) -> None:
        """Release the store (its connection and file descriptors), the placeholders built ahead and the memos.

        The memos spare later writes and views; with the store closed there are none, and they held the session's
        rendered views and the texts of its latest outputs (a closed manager of 40 turns of 30 KB outputs at a 16K
        window: ~1.9 MB, as long as its caller held it).
        """
        self._placeholders = None  # (they hold masked copies of the session's outputs)
        self._views = TextMemo(max_bytes=VIEW_MEMO_BYTES)
        self._needs = TextMemo(max_bytes=NEEDS_MEMO_BYTES)
        self._ref_ids = _RefIds()
        self.store.close()


def referenced_refs(messages: Iterable[Message]) -> set[str]:
    """Ref ids a message list still points at: ``meta["ref"]`` and any ref quoted in text (summaries cite them)."""
    found: set[str] = set()
    for m in messages:
        ref = m.meta.get("ref")
        if isinstance(ref, str) and is_ref_id(ref):
            found.add(ref)
        text = m.text
        if REF_PREFIX in text:
            found.update(REF_PATTERN.findall(text))
        for call in m.tool_calls:
            if REF_PREFIX in call.arguments:
                found.update(REF_PATTERN.findall(call.arguments))
    return found


class _RefIds:
    """The ref ids of the latest long texts put, by the text object (issue 22).

    A repeated history's copies of an output share its text object: each was encoded and hashed whole again (a
    quarter of cutting the outputs of a 100,000-message bulk add). Found by identity, not by a hash of the text
    (a ref names content: another text's ref would be another output); the texts are kept, so few and bounded.
    """

    __slots__ = ("_chars", "_entries", "_lock", "_staged", "_staged_chars")

    MIN_CHARS = 4_096
    MAX_ENTRIES = 64
    MAX_CHARS = 16_000_000
    # Outputs staged ahead of a masking (ToolOutputCache.stage), with their bytes: those a batch takes soon.
    MAX_STAGED = 256
    MAX_STAGED_CHARS = 4_000_000

    def __init__(self) -> None:
        self._entries: OrderedDict[int, tuple[str, str]] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()
        self._staged: OrderedDict[int, tuple[str, str, bytes, int]] = OrderedDict()
        self._staged_chars = 0

    def staged(self, text: str, *, take: bool = False) -> tuple[str, bytes, int] | None:
        """(ref id, encoded bytes, line count) of ``text`` when staged (``take``: and no longer kept)."""
        if not self._staged:
            return None
        with self._lock:
            found = self._staged.get(id(text))
            if found is None or found[0] is not text:
                return None
            if take:
                del self._staged[id(text)]
                self._staged_chars -= len(text)
        return found[1], found[2], found[3]

    def stage(self, text: str, ref_id: str, data: bytes, line_count: int) -> None:
        if len(text) > self.MAX_STAGED_CHARS:
            return
        with self._lock:
            old = self._staged.pop(id(text), None)
            if old is not None:
                self._staged_chars -= len(old[0])
            self._staged[id(text)] = (text, ref_id, data, line_count)
            self._staged_chars += len(text)
            while len(self._staged) > self.MAX_STAGED or self._staged_chars > self.MAX_STAGED_CHARS:
                _, (dropped, _, _, _) = self._staged.popitem(last=False)
                self._staged_chars -= len(dropped)

    def get(self, text: str) -> str | None:
        if len(text) < self.MIN_CHARS:
            return None
        with self._lock:
            found = self._entries.get(id(text))
            return found[1] if found is not None and found[0] is text else None

    def put(self, text: str, ref_id: str) -> None:
        if not self.MIN_CHARS <= len(text) <= self.MAX_CHARS:
            return
        with self._lock:
            old = self._entries.pop(id(text), None)
            if old is not None:
                self._chars -= len(old[0])
            self._entries[id(text)] = (text, ref_id)
            self._chars += len(text)
            while len(self._entries) > self.MAX_ENTRIES or self._chars > self.MAX_CHARS:
                _, (dropped, _) = self._entries.popitem(last=False)
                self._chars -= len(dropped)


def _encode(text: str) -> bytes:
    # surrogatepass keeps even a lone surrogate (seen in decoded binary output) byte-for-byte retrievable.
    return text.encode("utf-8", "surrogatepass")


def _plain_text(message: Message) -> str | None:
    """The message's text when it is only text (images and documents are not cut), else None."""
    if isinstance(message.content, str):
        return message.content
    if all(isinstance(p, TextPart) for p in message.content):
        return message.text
    return None
