"""The archiver: what leaves a session's view goes to its archive first, redacted once.

A part the :class:`~contextfold.manager.ContextManager` holds. It writes pre-compaction transcripts (in a
``compact.archive`` span), summaries and what normalization dropped. The session's redactor keeps each message it
redacted (issue 22), so the next transcript (most of which was archived before) is not scanned again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._spans import ARCHIVE_KIND

if TYPE_CHECKING:
    from ..messages import Message
    from ..telemetry import Tracer

__all__ = ["Archiver"]

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

    def forget_removed(self, before: list[Message], after: list[Message]) -> None:
        """Have the redactor forget what left the view (``before`` and not ``after``), its transcript written.

        Its results were kept for this transcript and the summary; kept on, they held every message a compaction
        removed (and each redacted copy) until the ledger's cap shed them (issue 22: 149M characters after the
        first prepare() of 100,000 distinct recorded messages, the view 41 messages).
        """
        forget = getattr(self.redactor, "forget_messages", None)
        if forget is not None:
            kept = set(map(id, after))
            forget([m for m in before if id(m) not in kept])

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
        """``view`` redacted.

        The redactor keeps what it redacted (most of a view was redacted when added or read ahead, or archived
        before) and looks in those messages only for the secrets learned since.
        """
        redacted: list[Message] = self.redactor.redact_messages(view)
        return redacted
