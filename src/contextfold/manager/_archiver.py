"""The archiver: what leaves a session's view goes to its archive first, redacted once.

A part the :class:`~contextfold.manager.ContextManager` holds. It writes pre-compaction transcripts (in a
``compact.archive`` span), summaries and what normalization dropped, and remembers the messages it redacted, so
that the next transcript (most of which was archived before) does not scan them again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._spans import ARCHIVE_KIND

if TYPE_CHECKING:
    from ..messages import Message
    from ..telemetry import Tracer

__all__ = ["Archiver"]

# Redacted messages remembered for the next transcript: more than a view holds after compacting (its message cap
# is 500 by default), so only what left goes.
REDACT_MEMO_SIZE = 20_000


class Archiver:
    """Writes one session's transcripts, summaries and dropped messages to its archive, redacted.

    Args:
        archive: An :class:`~contextfold.archive.Archive`, or None (nothing is written; secrets are still learned).
        redactor: The session's :class:`~contextfold.redact.Redactor`, or None (redaction off).
        session_id: The session's archive folder.
        tracer: Where the ``compact.archive`` spans and ``compact.pruned_messages`` events go.
        secrets: The session's :class:`~contextfold.manager._secrets.SessionSecrets`, caught up before each write.
    """

    def __init__(self, archive: Any, redactor: Any, session_id: str, tracer: Tracer, secrets: Any = None) -> None:
        self.archive = archive
        self.redactor = redactor
        self.secrets = secrets  # (SessionSecrets: learned up to date before anything is written)
        self.session_id = session_id
        self.tracer = tracer
        self.transcripts = 0  # transcripts written (or, without an archive, that would have been)
        self._memo: dict[int, tuple[Message, Message]] = {}  # id(message) -> (message, redacted)
        self._memo_learned: object = None  # the redactor's learned-secrets table the memo was made with

    def transcript(self, view: list[Message]) -> int:
        """Archive ``view`` as the next pre-compaction transcript; returns its number."""
        with self.tracer.span("compact.archive", kind=ARCHIVE_KIND, messages=len(view)) as span:
            number = self._write(view)
            span.set(transcript=number)
            return number

    def _write(self, view: list[Message]) -> int:
        self.transcripts += 1
        if self.secrets is not None:
            self.secrets.catch_up()
        if self.archive is None:
            if self.redactor is not None:  # no archive to redact, but the redactor must still learn the secrets
                self._redact_view(view)  # that summaries may repeat without their context
            return self.transcripts
        if self.redactor is None:
            return int(self.archive.archive_transcript(self.session_id, view))
        messages = self._redact_view(view)
        # The archive redacts with the session's redactor (see _build._archive): redacting there as well would scan
        # every message twice (the slowest part of compacting a long history).
        same = getattr(self.archive, "redactor", None) is self.redactor
        return int(self.archive.archive_transcript(self.session_id, messages, redacted=same))

    def summary(self, number: int, payload: dict[str, Any]) -> None:
        """Archive the summary that came with transcript ``number`` (redacted)."""
        if self.archive is not None:
            self.archive.archive_summary(self.session_id, number, self.redacted(payload))

    def dropped(self, messages: list[Message]) -> None:
        """Archive what normalization removed for good (a result whose call was compacted away, a duplicate)."""
        from ..telemetry import MessagesPruned

        if not messages:
            return
        if self.secrets is not None:
            self.secrets.catch_up()
        if self.archive is not None:
            same = self.redactor is not None and getattr(self.archive, "redactor", None) is self.redactor
            redacted = self.redactor.redact_messages(messages) if self.redactor is not None else messages
            self.archive.archive_transcript(self.session_id, redacted, redacted=same)
        self.tracer.emit(MessagesPruned(session_id=self.session_id, count=len(messages),
                                        ids=tuple(str(m.meta.get("id", "")) for m in messages),
                                        kept={"normalization_dropped": len(messages)}))

    def redacted(self, payload: dict[str, Any]) -> dict[str, Any]:
        """``payload`` with its secrets redacted (as it is when redaction is off)."""
        if self.redactor is None:
            return payload
        redacted: dict[str, Any] = self.redactor.redact_obj(payload)
        return redacted

    def redact_text(self, text: str) -> str:
        """``text`` with its secrets redacted (as it is when redaction is off)."""
        return self.redactor.redact_text(text) if self.redactor is not None else text

    def _redact_view(self, view: Sequence[Message]) -> list[Message]:
        """``view`` redacted, reusing what earlier transcripts redacted: most of a view was archived before.

        Messages are immutable, so one redacted before is redacted the same way again, as long as the redactor
        learned no new secret meanwhile (a remembered secret changes the output): then everything is redone.
        """
        memo = self._memo
        learned = getattr(self.redactor, "_learned", None)
        if learned is None or learned is not self._memo_learned:
            memo.clear()
        out = self._redact_view_once(view, learned, clean_first=True)
        if getattr(self.redactor, "_learned", None) is not learned:
            # A secret was learned from this view: a message found clean before may repeat it. Again, scanning all.
            memo.clear()
            learned = getattr(self.redactor, "_learned", None)
            out = self._redact_view_once(view, learned, clean_first=False)
        return out

    def _redact_view_once(self, view: Sequence[Message], learned: object, *, clean_first: bool) -> list[Message]:
        memo = self._memo
        known: list[Message | None] = []
        fresh: list[Message] = []
        # Messages add() scanned and found clean (issue 22) need no redaction, nor the batch's prefilter.
        is_clean = getattr(self.redactor, "is_clean", None) if clean_first else None
        for m in view:
            entry = memo.get(id(m))
            if entry is not None and entry[0] is m:
                known.append(entry[1])
            elif is_clean is not None and is_clean(m):
                known.append(m)
            else:
                known.append(None)
                fresh.append(m)
        # The rest in one batch (redact_messages prefilters the lot), in order, as one by one would.
        redacted: list[Message] = self.redactor.redact_messages(fresh) if fresh else []
        done = iter(redacted)
        out = [next(done) if m is None else m for m in known]
        # Only the newest are remembered: the next transcript is the view after this compaction, its tail.
        for original, result in zip(fresh[-REDACT_MEMO_SIZE:], redacted[-REDACT_MEMO_SIZE:], strict=True):
            memo[id(original)] = (original, result)
        if len(memo) > REDACT_MEMO_SIZE:  # keep the memo to about one view: drop what left the view
            kept = {id(m) for m in view}
            for key in [k for k in memo if k not in kept]:
                del memo[key]
        # Learning replaces the redactor's copy-on-write table. A secret learned during this view may repeat in
        # messages redacted before it was found: then nothing is remembered, and the next transcript redoes all.
        after = getattr(self.redactor, "_learned", None)
        if after is not learned:
            memo.clear()
        self._memo_learned = after
        return out
