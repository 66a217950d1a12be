"""The secrets of a session, learned before contextfold writes text of its own, and kept out of what it writes.

A part the :class:`~contextfold.manager.ContextManager` holds. Messages added are noted; before the manager writes
anything of its own (a masked output's digest, a summary, an archived transcript), :meth:`SessionSecrets.catch_up`
learns the secrets of every message noted since, and of the whole outputs that write-time truncation cut, so that
a value found in context anywhere in the session is redacted wherever it appears bare; what was learned is saved to
the session's store. Summarizers are handed only redacted text (:class:`SecretSafeSummarizer`): a summary cannot
repeat a secret it never saw, and what it writes is redacted again before it is stored.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..messages import Message
    from ..summarize import Summarizer, SummaryRequest, SummaryResult

__all__ = ["MAX_LEARN_SOURCE_CHARS", "SecretSafeSummarizer", "SessionSecrets"]

_log = logging.getLogger(__name__)

# Of a cut output read whole when catching up, at most this many characters: its first and last halves past that
# (a 100 MB log is not scanned whole; what its view shows comes from its ends).
MAX_LEARN_SOURCE_CHARS = 4_000_000
# Messages of one add() followed for a value typed after a key phrase as they are added (redact._split); a bulk add
# (a resumed history) is followed at the next catch-up instead, off add()'s path.
_SPLIT_NOW_MAX = 256


class SessionSecrets:
    """What one session's redactor must have learned before anything is written, and when to save it.

    Args:
        redactor: The session's :class:`~contextfold.redact.Redactor` (remembering into the session's memory), or
            None when redaction is off (then every method does nothing).
        cache: The tool output cache the whole text of cut outputs is read from (None: none).
    """

    def __init__(self, redactor: Any, cache: Any) -> None:
        self.redactor = redactor if redactor is not None and hasattr(redactor, "learn_from") else None
        # (contextfold's own Redactor can learn without keeping its results for a summary: see catch_up)
        self._keeps_learned = False
        if self.redactor is not None:
            from ..redact._redactor import Redactor

            self._keeps_learned = isinstance(self.redactor, Redactor)
        self.cache = cache
        self._pending: list[Message] = []
        self._pending_refs: list[str] = []
        self._lock = threading.Lock()  # (the pending lists)
        # Held while learning: a catch-up returns only once what the background thread took is learned too.
        self._learning = threading.Lock()
        self._split: Any = None  # (redact._split.SplitSecrets, made on first use: values typed after a key phrase)
        self._split_deferred: list[Message] = []  # (a bulk add's messages: followed at the next catch-up)

    def added(self, messages: Sequence[Message]) -> None:
        """Note messages added to the session (learned from by the next :meth:`catch_up`)."""
        if self.redactor is None or not messages:
            return
        # ("ref" first: a dict look-up, where the kind is a property; a bulk add notes 100,000 messages here.)
        refs = [str(m.meta["ref"]) for m in messages if "ref" in m.meta and m.kind == "truncated" and m.meta["ref"]]
        with self._lock:
            self._pending.extend(messages)
            self._pending_refs.extend(refs)
            # A turn's messages are followed now, before anything redacts them; a bulk add's at the next catch-up
            # (before a summary, a digest or a transcript), in the order added.
            if len(messages) > _SPLIT_NOW_MAX or self._split_deferred:
                self._split_deferred.extend(messages)
                return
        self._learn_split(messages)

    def catch_up(self, *, for_summary: bool = True) -> None:
        """Learn the secrets of everything noted since the last call, then save the memory to the session's store.

        ``for_summary`` off (a masking's catch-up): the redactor keeps nothing for a summarizer's request, when it
        is contextfold's (``Redactor.learn_from(keep=False)``); another redactor learns as it always does.
        """
        if self.redactor is None:
            return
        with self._learning:
            with self._lock:
                pending, self._pending = self._pending, []
                refs, self._pending_refs = self._pending_refs, []
                deferred, self._split_deferred = self._split_deferred, []
            if deferred:
                self._learn_split(deferred)
            if pending and (for_summary or not self._keeps_learned):
                self.redactor.learn_from(pending)  # (what add() or the read-ahead redacted is not read again)
            elif pending:
                self.redactor.learn_from(pending, keep=False)
            self._learn_stored(refs)
        self.save()

    def adopted(self, messages: Sequence[Message]) -> None:
        """The session goes on from ``messages`` (stored by another manager).

        A key phrase ending its latest user message waits for the value the next messages may type (the proxy's
        next request adds the value alone, to a manager of its own).
        """
        if self.redactor is None:
            return
        latest = next((m for m in reversed(messages) if m.role == "user"), None)
        if latest is not None:
            from ..redact._split import SplitSecrets

            self._split = SplitSecrets()
            self._split.values([latest])  # (its own value was learned when it was added)

    def _learn_split(self, pending: Sequence[Message]) -> None:
        """Learn the values typed alone after a user message that ends with a key phrase (redact._split)."""
        redactor = self.redactor
        memory = getattr(redactor, "memory", None)
        if memory is None or not getattr(redactor, "enabled", True) or not getattr(redactor, "remember", True):
            return
        if self._split is None:
            from ..redact._split import SplitSecrets

            self._split = SplitSecrets()
        for value, kind in self._split.values(pending):
            memory.learn(value, kind)

    def learn_outputs(self, outputs: Mapping[str, str]) -> None:
        """Learn the secrets of whole outputs cut at write time (``ref -> text``) now: the catch-up skips them.

        What ``add()`` does past half the soft threshold, with the texts in hand: a masking turn then does not scan
        them.
        """
        if self.redactor is None or not outputs:
            return
        with self._learning:
            for text in outputs.values():
                self.redactor.learn_text(_capped(text))
            with self._lock:
                self._pending_refs = [ref for ref in self._pending_refs if ref not in outputs]

    def read_ahead(self) -> None:
        """Learn the whole outputs noted since the last catch-up (the background thread, while the agent waits)."""
        # (Most turns have none: past half the soft threshold add() learns the outputs it cuts. A ref noted while
        # this looks is taken by the next read-ahead or catch-up.)
        if self.redactor is None or not self._pending_refs:
            return
        with self._learning:
            with self._lock:
                refs, self._pending_refs = self._pending_refs, []
            self._learn_stored(refs)

    def _learn_stored(self, refs: list[str]) -> None:
        assert self.redactor is not None
        for ref in dict.fromkeys(refs):
            text = self._whole_output(ref)
            if text:
                self.redactor.learn_text(text)

    def _whole_output(self, ref: str) -> str:
        from ..errors import ContextfoldError

        if self.cache is None:
            return ""
        try:
            text = str(self.cache.get(ref))
        except ContextfoldError:
            return ""  # (gone from the store: its view is all there is, and it was learned from with its message)
        return _capped(text)

    def save(self) -> None:
        """Write what the memory learned to the session's store; a store that fails is reported, not raised."""
        if self.redactor is None:
            return
        memory = getattr(self.redactor, "memory", None)
        if memory is None:
            return
        try:
            memory.save()
        except Exception as exc:  # a store's own error: the session goes on, the memory stays in this process
            _log.warning("could not save the session's secret memory: %s: %s", type(exc).__name__, exc)

    def redact_text(self, text: str) -> str:
        """``text`` redacted (as it is when redaction is off)."""
        return str(self.redactor.redact_text(text)) if self.redactor is not None else text

    def guard(self, summarizer: Summarizer, context: Sequence[Message] = ()) -> Summarizer:
        """``summarizer`` as it must run in this session: on redacted text, its summary redacted again.

        ``context``: messages to learn from first (the whole view, when the summarizer runs away from the manager's
        lock, on an idle-compaction thread).
        """
        if self.redactor is None:
            return summarizer
        return SecretSafeSummarizer(summarizer, self.redactor, context)


def _capped(text: str) -> str:
    if len(text) <= MAX_LEARN_SOURCE_CHARS:
        return text
    half = MAX_LEARN_SOURCE_CHARS // 2
    return text[:half] + "\n" + text[-half:]


class SecretSafeSummarizer:
    """A summarizer that never sees a secret and never writes one.

    The request's messages, earlier summary and verbatim texts are redacted before the wrapped summarizer reads
    them (an LLM summarizer sends them to a provider; the extractive one lists ids as they stand), and the summary,
    retained facts and warnings it returns are redacted again: a remembered value an LLM rewrote stays caught.
    """

    def __init__(self, inner: Summarizer, redactor: Any, context: Sequence[Message] = ()) -> None:
        self.inner = inner
        self.redactor = redactor
        self.context = context

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Summarize the redacted request; return the result redacted."""
        redactor = self.redactor
        if self.context:
            redactor.learn_from(self.context)
        # The generation the messages were redacted at, read before the work (a secret learned on another thread
        # after the redaction but before a read here would label them as considering it: a verbatim text holding it
        # then took its message's unredacted content).
        if _generation(redactor) is None:
            messages, redacted_at = redactor.redact_messages(request.messages), None
        else:
            messages, redacted_at = redactor.redact_messages_at(request.messages)
        provider_clean = tuple(redactor.redact_provider_state(messages))
        previous = redactor.redact_text(request.previous_summary) if request.previous_summary is not None else None
        # A verbatim text is a user message's text, mostly one summarized too (1,462 of 1,468 in bench_compaction):
        # its redaction is that message's content, when nothing was learned since (issue 22: ~7% of a cold
        # compaction scanned each again, the prefilter having cleared them as messages, not as texts).
        known = _user_texts(request.messages, messages) if redacted_at is not None and \
            _generation(redactor) == redacted_at else {}
        verbatim = tuple(known[text] if text in known else redactor.redact_text(text) for text in request.verbatim)
        clean = replace(request, messages=provider_clean, previous_summary=previous, verbatim=verbatim)
        result = self.inner.summarize(clean)
        return replace(result, summary=redactor.redact_text(result.summary),
                       retain=tuple(redactor.redact_text(fact) for fact in result.retain),
                       warnings=tuple(redactor.redact_text(w) for w in result.warnings))

    def __getattr__(self, name: str) -> Any:
        # Anything else a summarizer offers (its counter, a name, a close()) is the wrapped summarizer's.
        return getattr(self.inner, name)


def _generation(redactor: Any) -> int | None:
    """How much a contextfold ``Redactor`` without a callback has remembered (None for another redactor)."""
    from ..redact import Redactor

    if type(redactor) is not Redactor or redactor.callback is not None or not redactor.enabled:
        return None
    return int(redactor.memory.generation) if redactor.remember else 0


def _user_texts(originals: Sequence[Message], redacted: Sequence[Message]) -> dict[str, str]:
    """Each user message's text content in ``originals`` -> that content in its redaction (``redacted``)."""
    return {m.content: r.content for m, r in zip(originals, redacted, strict=True)
            if m.role == "user" and isinstance(m.content, str) and isinstance(r.content, str)}
