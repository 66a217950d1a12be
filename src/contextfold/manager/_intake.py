"""What ``ContextManager.add()`` does with the messages it is given, and what it reads of them ahead of a compaction.

:class:`Intake` stores each new message as the view keeps it (its id, a foreign ref dropped, an input over the size
limit reported, a tool output or a never-sendable paste cut at write time under its tool's rule, the cut's event),
counts it, tells the secrets and steering parts, appends the batch to the view and runs the policy check after tool
results. From half the soft threshold on it reads what later maskings and compactions need of each new message as
it arrives (the extractive summary's reading, the secrets), and it queues the messages added before for the
background read-ahead that ``prepare()`` starts (:meth:`Intake.warm_for_compaction`). The view, the lock and the
sequence of ids stay the manager's (``contextfold.manager._manager``, which holds one intake).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from .. import _background
from . import _compactor
from ._masking import keep_layout
from ._read_ahead import HeldOutputs, run_parts

if TYPE_CHECKING:
    from ..compaction import Budgets, Plan, Policy
    from ..messages import Message
    from ..steering import Steering
    from ..summarize import Summarizer
    from ..telemetry import CacheTruncated, Tracer
    from ..tokens import MessageCounter
    from ._answered_view import AnsweredWidening
    from ._cache_economics import CacheEconomics
    from ._compactor import Compactor
    from ._idle import IdleCompactions
    from ._masking import Masking
    from ._provider_items import ProviderItems
    from ._secrets import SessionSecrets
    from ._view import View

__all__ = ["WARM_AT_SHARE_OF_SOFT", "Intake", "IntakeHost", "WideOutputs"]

_log = logging.getLogger("contextfold.manager._manager")  # (the manager's logger, as before the move)

# Past half the soft threshold a compaction is a few turns away: read the new messages in the background while the
# agent waits for its model (entities extracted, secrets scanned), so that the compaction finds them read (issue 15).
WARM_AT_SHARE_OF_SOFT = 0.5
# A manager never holds more than this many messages waiting (a huge add() before the threshold is reached is
# warmed only in part; the compaction reads the rest itself).
_MAX_UNWARMED = 20_000


class WideOutputs(Protocol):
    """Whether a wider answered output stays when a new turn begins (the manager's compaction runner says)."""

    def keeps_wide(self, index: int, wide: Message, standard: Message) -> bool: ...


class IntakeHost(Protocol):
    """What :class:`Intake` uses of its manager (``contextfold.manager._manager``, which imports this module)."""

    _seq: int
    _archived_seq: int

    @property
    def budgets(self) -> Budgets: ...
    @property
    def cache(self) -> Any: ...
    @property
    def counter(self) -> MessageCounter: ...
    @property
    def policy(self) -> Policy: ...
    @property
    def redactor(self) -> Any: ...
    @property
    def session_id(self) -> str: ...
    @property
    def steering(self) -> Steering: ...
    @property
    def tracer(self) -> Tracer: ...
    @property
    def _view(self) -> View: ...
    @property
    def _compactor(self) -> Compactor: ...
    @property
    def _idle(self) -> IdleCompactions: ...
    @property
    def _compaction(self) -> WideOutputs: ...
    @property
    def _economics(self) -> CacheEconomics: ...
    @property
    def _masking(self) -> Masking: ...
    @property
    def _provider_items(self) -> ProviderItems: ...
    @property
    def _secrets(self) -> SessionSecrets: ...
    @property
    def _summarizer(self) -> Summarizer | None: ...
    @property
    def _widening(self) -> AnsweredWidening | None: ...
    @property
    def _tool_tokens(self) -> int: ...
    def check(self, where: str = "check") -> Plan: ...
    def _never_masked(self) -> frozenset[str] | None: ...
    def _archive_transcript(self, view: list[Message]) -> int: ...
    def _archive_dropped(self, also: Sequence[Message] = ()) -> None: ...


class Intake:
    """The messages a manager is given: stored as its view keeps them, read ahead of the compactions to come."""

    def __init__(self, manager: IntakeHost, id_prefix: str) -> None:
        self.manager = manager
        self.id_prefix = id_prefix  # (see ContextManager.__init__: ids never repeat across a session's managers)
        self.unwarmed: list[Message] = []  # messages added that no background warming has read yet
        # The ids of those whose calls' access add() read (an agent's turn once past half the soft threshold).
        self.calls_read: set[int] = set()
        self.unredacted = 0  # of those, the first this many, added before add() redacted what it adds
        self.held_outputs = HeldOutputs()  # outputs whose digest material is read once a masking can take them
        self.reading = False  # past half the soft threshold: add() reads what it adds (see _read_on_add)
        # The last view a provider's compaction item replaced, archived: its digest and transcript number.
        self._replaced_archived: tuple[bytes, int] | None = None

    def add(self, incoming: list[Message]) -> None:
        """Store ``incoming`` (coerced, under the lock): the write-time views, the secrets, the view, the read-ahead.

        All or nothing. What can fail (the stores, the tokenizer, the redactor and its callback, the archive of
        the results that answer no call) runs before the batch is committed; what commits it is the manager's own
        bookkeeping. A raise before that point leaves the view, the ids, the pairing and every part's state as they
        were; what it leaves behind no later step reads as the view's (the outputs stored and their cut events,
        memos of what was counted or read, secrets learned from the batch). A provider's compaction item archives
        the view it replaces after the commit: when that archive fails the batch is taken out again. The view's
        count and the trigger check after tool results run once the batch is in: their errors are logged (see
        :meth:`_check_after_results`); an interrupt (a ``BaseException`` that is not an ``Exception``) from them, or
        any raise after the commit, takes the batch out again (every part as it was) and propagates. An
        ``AddRolledBack`` voids every event a failed add sent after narrowing the answered outputs (which stays),
        whether it failed before its commit or after.
        """
        manager = self.manager
        if manager._widening is not None and manager._widening.active and any(m.role != "tool" for m in incoming):
            # A new turn: the outputs it follows are no longer being answered (unless putting one back would cost
            # more prompt cache than it saves: then it stays, as part of the history). All or nothing itself, and
            # the view valid either way: if this add fails later, the next prepare() widens them again.
            manager._widening.narrow(manager._view, keep=manager._compaction.keeps_wide)
        # What this add() sends from here on (the cuts at write time and their copies' events, the large-input
        # warnings, the archive of orphan results, what the commit tells): a raise before the commit or a rollback
        # after it voids them all (AddRolledBack), and the caller's retry sends its own.
        sent = manager.tracer.record_sent()
        stored: list[Message] = []
        try:
            self._add_recorded(incoming, sent, stored)
        except BaseException as error:
            if sent and manager.tracer.recording_sent():
                # A raise before the commit (a store, the redactor, the archive of orphan results): what the add sent
                # so far (the cuts of its outputs, its large-input warnings) tells of a batch the history never got.
                # (A raise after the commit stopped the recording and voided what it sent itself.)
                manager.tracer.stop_recording()
                self._voided(error, stored, sent)
            raise
        finally:
            manager.tracer.stop_recording()

    def _voided(self, error: BaseException, stored: list[Message], sent: list[str]) -> None:
        """Say that the add failed and that the events it sent (``sent``) no longer hold (the last step: may raise)."""
        from ..telemetry import AddRolledBack

        manager = self.manager
        manager.tracer.emit(AddRolledBack(session_id=manager.session_id, error_type=type(error).__name__,
                                          ids=tuple(str(m.meta.get("id", "")) for m in stored), voided=tuple(sent)))

    def _add_recorded(self, incoming: list[Message], sent: list[str], stored: list[Message]) -> None:
        """:meth:`add` past the narrowing, while the tracer notes in ``sent`` what it sends; ``stored`` fills up."""
        from ..provider_context import BOUNDARY_KIND
        from ..telemetry import CacheTruncated

        manager = self.manager
        cut: dict[str, str] = {}  # ref -> the whole output, for the outputs cut at write time
        # The sequence moves only once the batch is committed: a failed add leaves no gap and no half-added batch.
        seq = manager._seq
        prefix, large = self.id_prefix, manager.policy.large_input_bytes
        boundaries = results = False  # (whether the batch holds a provider's compaction item, a tool result)
        # What the steps below made of each message object given in this batch, and its cut's event: a repeated or
        # resumed history gives one object many times (the 100,000 recorded messages are ~30 copies of 3,388), and
        # each step is a function of the message, the batch and the view as they stand (issue 22).
        made: dict[int, _Made] = {}
        # Each new message is counted soon after its write-time step, whose exact count of an output is then still
        # among the remembered counts of long texts (a bounded memo: 100,000 distinct messages counted after the loop
        # found none of those counts, and every output between the token cap and the byte cap was counted twice).
        manager.counter.ensure_capacity(len(manager._view) + len(incoming))
        uncounted: list[Message] = []
        for given in incoming:
            seq += 1
            again = made.get(id(given))
            if again is None:
                given_id = given.meta.get("id")
                m, truncated = self._store_one(given.with_id(given_id or f"{prefix}:{seq}"), incoming, cut)
                if "ref" not in given.meta:  # (a foreign ref may become the session's own within the batch)
                    text = given.content
                    made[id(given)] = _Made(m, truncated, given_id, type(text) is not str or 4 * len(text) > large,
                                            m.role == "tool", m.meta.get("kind") == BOUNDARY_KIND)
                uncounted.append(m)
                if len(uncounted) >= _COUNT_AFTER_STORED:
                    manager.counter.count_each(uncounted)  # (remembered by the counter: the count below looks them up)
                    uncounted = []
            else:
                # A copy of ``first`` (its origin): what depends on the message alone was found for the first.
                first, truncated, given_id, maybe_large, _, _ = again
                m = first.with_id(given_id or f"{prefix}:{seq}")
                if maybe_large:
                    self._warn_if_large(given.with_id(m.meta["id"]))
                if truncated is not None:  # (an event of its own: its ids and time)
                    manager.tracer.emit(CacheTruncated(session_id=manager.session_id, ref=truncated.ref,
                                                       bytes=truncated.bytes, kept_bytes=truncated.kept_bytes,
                                                       tool_name=truncated.tool_name))
                stored.append(m)
                continue
            if m.role == "tool":
                results = True
            if m.meta.get("kind") == BOUNDARY_KIND:
                boundaries = True
            stored.append(m)
        # (The copies' roles and kinds are their first copy's, looked at once.)
        for entry in made.values():
            results = results or entry.tool
            boundaries = boundaries or entry.boundary
        view = manager._view
        kept, orphans = view.split_orphans(stored)
        if orphans:
            boundaries = any(m.kind == BOUNDARY_KIND for m in kept)
            results = any(m.role == "tool" for m in kept)
        # Counted now, as DESIGN's flow of a turn has it, not by the next prepare(): the exact tokenizer releases
        # the GIL, and a background thread taking it then would hold the model call up (issue 15, p99).
        added = sum(manager.counter.count_each(kept))
        manager._secrets.added(stored)  # (learning from a batch that then fails redacts the caller's secrets: safe)
        counting_view = not self.reading  # (the view is counted below, as the reading's threshold counted it)
        calls_read = self._read_on_add(kept, cut, added)
        if orphans:  # (the last step that may fail: archived only by an add that gets this far)
            manager._archive_dropped(orphans)
        # -- Committed: the manager's own bookkeeping from here on, but for a provider's compaction item. --
        # What the rollback below puts back: the view is copied only when the append rewrites more than its end (a
        # late result in place of an "aborted" output, a provider's compaction item: rare); else its settled prefix
        # is kept and its unsettled tail copied, O(tail): the view's count and the check settle it, and settling
        # rewrites the stored messages after the prefix, those before the batch included (an "aborted" output
        # inserted after an unanswered call, a duplicate result dropped), never the prefix itself. The other parts
        # say what they change.
        before = list(view.raw) if boundaries or view.answers_late(kept) else None
        settled_before = view.tail_start()
        tail_before = view.raw[settled_before:]
        # (What normalizing for the item's archive drops goes with the rollback too: the restored view drops it again.)
        dropped_before = len(view.dropped)
        seq_before, manager._seq = manager._seq, seq
        idle_before = manager._idle.started_mark()
        # (A provider item's archive marks the view archived up to the batch, and clears the compactor's floors.)
        archived_before = manager._archived_seq
        floor_before, stalled_before = manager._compactor.floor, manager._compactor.stalled
        steering_before, economics_before = manager.steering.added_mark(), manager._economics.added_mark()
        compactor_policy, origins = manager._compactor.policy, set(manager._provider_items.origins)
        unwarmed_before, unredacted_before = len(self.unwarmed), self.unredacted
        view.append(kept)
        try:
            self._commit(stored, kept, added, counting_view, calls_read, boundaries, results)
        except BaseException as error:
            manager.tracer.stop_recording()
            # All or nothing for an interrupt too (a KeyboardInterrupt in the view's count or the trigger check; the
            # provider item's archive failing): the batch out again, every part as it was, a background compaction
            # the check started on it forgotten (the retry's check starts its own).
            view.replace(before if before is not None else [*view.raw[:settled_before], *tail_before],
                         checked=view.checked)
            del view.dropped[dropped_before:]  # (else archived twice: now, and when normalized again)
            manager._seq = seq_before
            manager._idle.forget_started_since(idle_before)
            manager._archived_seq = archived_before  # (else the close() skipped the final transcript it owes)
            manager._compactor.floor, manager._compactor.stalled = floor_before, stalled_before
            manager.steering.take_back_added(steering_before)
            manager._economics.take_back_added(economics_before)
            manager._compactor.policy = compactor_policy
            manager._provider_items.origins = origins
            del self.unwarmed[unwarmed_before:]
            self.unredacted = unredacted_before
            self.calls_read.difference_update(map(id, kept))
            manager.tracer.take_back_folded()  # (its check's decision, folded: it decided on the batch taken out)
            # The events the commit sent (its trigger decision, what settling pruned) stay sent: this one says
            # they no longer hold, and which messages are not in the history.
            self._voided(error, stored, sent)
            raise

    def _commit(self, stored: list[Message], kept: list[Message], added: int, counting_view: bool,
                calls_read: bool, boundaries: bool, results: bool) -> None:
        """The batch, appended to the view: the parts told, the view counted, the policy's check (see :meth:`add`)."""
        manager, view = self.manager, self.manager._view
        if boundaries and manager._provider_items.drop_before_boundary(view, self._archive_replaced):
            manager._compactor.floor = manager._compactor.stalled = None  # of a view that no longer exists
        self._note_steering(stored)
        queued = len(self.unwarmed)
        if queued < _MAX_UNWARMED:
            self.unwarmed.extend(_worth_reading(stored)[:_MAX_UNWARMED - queued])
        manager._provider_items.note(kept)
        manager.counter.ensure_capacity(len(view))
        manager._economics.note_added(kept, added)
        if len(kept) > _READ_AHEAD_MAX and added >= manager.budgets.hard:
            # A bulk add past the hard threshold on its own: the next prepare() compacts it, and the background
            # read-ahead of its ends would run beside that compaction, learning again the secrets its catch-up learns
            # of messages it summarizes (~0.5 s of CPU in the first prepare() of 100,000 recorded messages, issue 22).
            del self.unwarmed[queued:]
        if calls_read:
            if len(self.calls_read) > _MAX_UNWARMED:  # (no read-ahead for long: a view shrunk below where it runs)
                self.calls_read.clear()  # (the read-ahead then looks a few of them up again: the access memo has them)
            self.calls_read.update(map(id, kept))  # (the read-ahead does not read them again)
        if not self.reading:
            self.unredacted = len(self.unwarmed)  # (past half the soft threshold, add() redacts what it adds)
        if counting_view:
            # Its tail normalized and counted now (the batch's counts looked up), not by the next prepare(): as before
            # the reading's threshold was read before the commit, where this view's totals were those of the last
            # add's (a look-up then). Only an output normalizing adds ("aborted") may be new to the tokenizer: if it
            # fails, the batch is in all the same, and the next prepare() counts again (and raises there).
            try:
                view.totals()
            except Exception:
                _log.warning("counting the view after add() failed; the next prepare() counts it", exc_info=True)
        if results:
            self._check_after_results()

    def _archive_replaced(self, view: list[Message]) -> int:
        """Archive the view a provider's compaction item replaces: once for the same messages.

        An add() rolled back after this archive (an interrupt in its count or its check) left the transcript
        written; the caller's retry replaces the same view, and wrote the same transcript again under the next
        number. The same messages (ids and content) are now the transcript already written: its number, the view
        marked archived again (the rollback took the mark back).
        """
        key = _view_key(view)
        done = self._replaced_archived
        if done is not None and done[0] == key:
            self.manager._archived_seq = self.manager._seq
            return done[1]
        number = self.manager._archive_transcript(view)
        self._replaced_archived = (key, number)
        return number

    def _check_after_results(self) -> None:
        """The policy's check after tool results arrive, once the batch is in: its failure does not undo the add.

        The check decides without acting (an event; with ``background``, a compaction started on a worker thread)
        and the next ``prepare()`` decides again, so an error in it is logged and reported, not raised: raising
        would tell the caller the batch was not added when it was (a retry then added it twice). An interrupt
        (an exception that is not an ``Exception``) still propagates: :meth:`add` takes the batch out again.
        """
        from ..telemetry import CompactWarning

        manager = self.manager
        try:
            manager.check("after tool execution")
        except Exception as error:
            message = f"the check after tool execution failed ({type(error).__name__}); the messages were added"
            _log.exception(message)
            manager.tracer.emit(CompactWarning(session_id=manager.session_id, message=message, code="check_failed"))

    def _store_one(self, m: Message, incoming: Sequence[Message], cut: dict[str, str],
                   ) -> tuple[Message, CacheTruncated | None]:
        """``m`` (with its id) as the view keeps it, and the event of its cut at write time if it was cut.

        The steps are skipped where their first test would return at once: this runs for each message of a bulk
        add (a resumed history of 100,000, issue 22).
        """
        from ..provider_context import mark
        from ..telemetry import CacheTruncated

        manager = self.manager
        if type(m.content) is not str:
            m = mark(m)
        if "ref" in m.meta:
            m = self.without_foreign_ref(m)
        if type(m.content) is not str or 4 * len(m.content) > manager.policy.large_input_bytes:
            self._warn_if_large(m)
        truncated = None
        if manager.cache is not None and not m.protected:  # protected: byte for byte
            processed = (self._write_time_view(m, incoming) if m.role == "tool"
                         else self._cut_if_never_sent(m) if m.role == "user" else m)
            if processed is not m and processed.meta.get("ref"):
                cut[str(processed.meta["ref"])] = m.text
                # surrogatepass: a lone surrogate is stored as it came; measuring it must not fail.
                truncated = CacheTruncated(session_id=manager.session_id, ref=str(processed.meta["ref"]),
                                           bytes=len(m.text.encode("utf-8", "surrogatepass")),
                                           kept_bytes=len(processed.text.encode("utf-8", "surrogatepass")),
                                           tool_name=m.name)
                manager.tracer.emit(truncated)
            if processed is not m:
                m = keep_layout(m, processed)
        return m, truncated

    def _read_on_add(self, stored: list[Message], cut: dict[str, str], added: int) -> bool:
        """Read what later compactions and maskings need of the new messages, once, as they arrive (issue 22).

        The extractive summary's reading of each message and the secrets the archive will redact: remembered by
        content, so that masking, compaction and the archive assemble them instead of scanning the texts again. From
        half the soft threshold on (a compaction is a few turns away); what was added before is read on the
        background thread then (a tool output's digest material too, once a masking can take it: ``_read_ahead``).
        Of a bulk add (a resumed or imported history) only the two ends are read (see ``_worth_reading``); the
        compaction's catch-up learns the secrets of the rest (learning them here instead was measured to cost more
        than it saved, issue 22).

        Run before the batch is committed (the redactor's callback may raise): ``added`` is what the batch adds to
        the view's tokens. Returns whether the calls' access was read (the caller notes them once committed).
        """
        manager = self.manager
        if not self.reading:
            tokens, _, _ = manager._view.totals()  # (the view before the batch)
            if tokens + added + manager._tool_tokens < manager.budgets.soft * WARM_AT_SHARE_OF_SOFT:
                return False
            self.reading = True
        summarizer = manager._summarizer
        extractive = summarizer is None  # (the default, built by the first compaction: not imported for this)
        if not extractive:
            from ..summarize import ExtractiveSummarizer

            extractive = isinstance(summarizer, ExtractiveSummarizer)
        worth = _worth_reading(stored)
        if extractive:
            from ..summarize.digest import read_message
            from ._compactor import masked_before_summarized

            never_masked = manager._never_masked()
            for m in worth:
                if never_masked is None or not masked_before_summarized(m, never_masked):
                    read_message(m)
        # (A tool output's digest material is read when it is first masked, or ahead of that by the background
        # thread when masking is automatic: most outputs of a session that compacts are never masked.)
        manager._secrets.learn_outputs(cut)  # the whole outputs cut at write time: scanned now, not on a masking turn
        # Each message redacted once, the result kept, a bulk add's two ends too: left to the compaction's catch-up
        # they cost it about what they saved here (~0.5 of ~0.6 s at 100,000 recorded messages), and a cold
        # compact() after one bulk add read 402 ms per 1M tokens instead of 314 (bench_compaction, issue 22).
        if manager.redactor is not None and hasattr(manager.redactor, "redact_ahead"):
            manager.redactor.redact_ahead(worth, paced=False)
        # What each new call accesses (its arguments parsed), as the next masking's order reads it: the model's call
        # is added after the read-ahead that parses the others, so its masking turn parsed it (issue 22: ~50 us of
        # a ~1.2 ms turn, cold). A bulk add leaves its calls to the read-ahead.
        if len(stored) <= _CALLS_READ_ON_ADD and manager.cache is not None and manager.policy.auto:
            manager.steering.read_calls_ahead(stored)
            return True
        return False

    def without_foreign_ref(self, m: Message) -> Message:
        """``m`` without its ``meta["ref"]`` when that names an output this session does not own.

        A ref in an added message is contextfold's own bookkeeping (a message coming back from a framework's
        history); one this session never stored (another session's output, a made-up id) must not let widening,
        masking or restoring read that output into this session (issue 21 §4: 1,206 lines of another session's
        output appeared in a view). Its text stays as it came.
        """
        manager = self.manager
        ref = m.meta.get("ref")
        if ref is None or manager.cache is None or (isinstance(ref, str) and manager.cache.owns(ref)):
            return m
        return m.with_meta(ref=None)

    def _write_time_view(self, m: Message, batch: Sequence[Message]) -> Message:
        """The tool result as the view keeps it: cut at write time under its tool's rule (``policy.tools``)."""
        manager = self.manager
        assert manager.cache is not None
        keep_whole, max_tokens = manager.steering.write_rule(m, batch, manager._view.raw)
        processed: Message = m if keep_whole else manager.cache.process(m, max_tokens=max_tokens)
        return processed

    def _note_steering(self, stored: Sequence[Message]) -> None:
        """Tell the steering part what arrived; a tool whose outputs must not be summarized gets protected."""
        manager = self.manager
        protected = manager.steering.note_added(stored, manager.policy.protected_tools)
        if protected is not None:
            manager._compactor.policy = manager.policy.model_copy(update={"protected_tools": protected})

    def _cut_if_never_sent(self, m: Message) -> Message:
        """A user message over the large-input limit and the whole window, cut to head, tail and ref at once.

        It could never be sent whole, and kept whole every later step would read all of it: a 10 MB paste made the
        next ``prepare()`` take 6.5 s, 50 MB 25-32 s and 1.6 GB (issue 22). Cut as it arrives, like a tool output
        at the write-time cap, the view, the summary and the archive read a few thousand tokens; the whole text is
        readable by its ref. Anything smaller stays whole (a compaction may still cut the request it answers).
        """
        manager = self.manager
        window, limit = manager.budgets.window, manager.policy.large_input_bytes
        text = m.text
        # (A character takes at most four bytes, a token at least one: most messages are ruled out by their length.)
        if (manager.cache is None or m.role != "user" or m.kind is not None or 4 * len(text) <= max(window, limit)
                or m.meta.get("ref") is not None or len(text.encode("utf-8", "surrogatepass")) <= limit):
            return m
        # The tokenizer's count (sampled past a length), not a provisional count in bytes, which would overstate it.
        if int(manager.counter.counter.count(text)) <= window:
            return m
        cut: Message = manager.cache.shrink(m, manager.cache.config.message_tokens(manager.cache.context_window))
        return cut

    def _warn_if_large(self, m: Message) -> None:
        """An input over ``policy.large_input_bytes`` (256 KB) is logged and reported (004 §2): usually a mistake."""
        manager = self.manager
        limit = manager.policy.large_input_bytes
        text = m.text
        if len(text) * 4 <= limit:  # UTF-8 takes at most 4 bytes a character: skip the encode for most messages
            return
        from ..telemetry import CompactWarning

        size = len(text.encode("utf-8", "surrogatepass"))
        if size > limit:
            message = (f"{m.role} message {m.meta.get('id')} is {size:,} bytes, over the {limit:,}-byte input limit; "
                       "it is kept (tool outputs are cut to a view) but consider trimming it at the source")
            _log.warning(message)
            manager.tracer.emit(CompactWarning(session_id=manager.session_id, message=message, code="large_input"))

    def warm_for_compaction(self, *, still_in_view: bool = False) -> None:
        """Read new messages on the background thread as the coming maskings will: secrets, digests, the calls.

        ``still_in_view``: only those the view still holds (after a compaction, which learned every secret: the
        others will never be masked).
        """
        manager = self.manager
        messages, self.unwarmed = self.unwarmed, []
        calls_read, self.calls_read = self.calls_read, set()
        # Only what add() did not redact is redacted ahead (issue 22: looking the others up again was ~40 ms of CPU
        # per 1M tokens in the lm32b loop; a secret learned since is looked for by the next use of the ledger).
        unredacted, self.unredacted = messages[:self.unredacted], 0
        if still_in_view:
            held = set(map(id, manager._view.raw))
            messages = [m for m in messages if id(m) in held]
            unredacted = [m for m in unredacted if id(m) in held]
        # What a masking turn needs is read ahead: every message's secrets, the outputs' digests, the calls' access.
        # What only a compaction needs (the messages added before half the soft threshold read for the summary, the
        # transcript lines) is left to the compaction, which reads what add() did not (issue 22: ~200 ms of the
        # read-ahead's ~1,000 per 1M tokens in the lm32b loop, where 6 turns of 1,390 compact; a cold compaction
        # reads all of it within its own bar, bench/bench_compaction.py).
        redactor = (manager.redactor if manager.redactor is not None and hasattr(manager.redactor, "redact_ahead")
                    else None)
        # Tool outputs' digest material only when masking is automatic: the coming maskings digest them (add()
        # never reads it: most outputs of a session that only compacts are never masked).
        masks = manager.cache is not None and manager.policy.mask_digest_tokens and manager.policy.auto
        outputs = manager.cache if masks else None
        # (Each output's digest material once a masking can take it soon: see _read_ahead.)
        digests = self.held_outputs.release(messages, manager.policy.keep_tool_io_pairs, manager.counter.count_message,
                                            manager.policy.mask_digest_tokens) if masks else []
        parts: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []  # (one job: see _read_ahead.run_parts)
        if redactor is not None or outputs is not None:
            parts.append((_compactor.warm_for_compaction, (messages, False, redactor, False, outputs,
                                                manager.policy.mask_digest_tokens if masks else 0,
                                                manager.counter.counter, None, digests, unredacted,
                                                manager.policy.mask_digest)))
        if digests:
            parts.append((manager._masking.encode_ahead, (digests,)))  # (the masked messages built: counted, encoded)
        if redactor is not None:
            parts.append((manager._secrets.read_ahead, ()))  # whole outputs cut before add() started reading
        if masks and manager.steering.superseded:
            calls = [m for m in messages if id(m) not in calls_read] if calls_read else messages
            if calls:
                parts.append((manager.steering.read_calls_ahead, (calls,)))  # (each call's access, as masking orders)
            # The prefix's superseded reads (from scratch after a rewrite), taken on in the turns that release
            # outputs to a masking only: a masking takes released outputs, and in the turns between releases the
            # fold would be a part of its own for the pair or two added (issue 22: 1,302 parts of the lm32b loop's
            # 1,390 jobs, ~25 us each on cold caches). A masking turn in between reads those pairs itself.
            fold = manager._masking.superseded_ahead() if digests else None
            if fold is not None:
                parts.append(fold)
        if parts:
            _background.submit(run_parts, parts)


# A compaction reads at most the first 200 and the newest 800 messages of what it summarizes (summarize/digest.py,
# MAX_READ_MESSAGES), and the archive redacts a history in bulk (Redactor.redact_messages). Of one add() of more
# (a resumed or imported history of 100,000 messages), reading every message ahead would cost more than both.
_READ_AHEAD_HEAD = 200
_READ_AHEAD_MAX = 1_000

# An add() of at most this many messages (an agent's turn: its call, or the call's results) has its calls' access
# read at once; a larger one (a resumed history) leaves them to the read-ahead, which reads what masking needs.
_CALLS_READ_ON_ADD = 16

# A bulk add counts its new messages by batches of this many as it stores them (see Intake.add): well within
# what the counter remembers of long texts (tokens/counting._LONG_COUNTS_MAX), few enough calls to cost nothing.
_COUNT_AFTER_STORED = 1_024


class _Made(NamedTuple):
    """What ``add()`` made of a message object given in its batch, for the copies of it given again (issue 22)."""

    first: Message  # the first copy as stored (its write-time steps done)
    truncated: CacheTruncated | None  # the event of its cut at write time, sent again for each copy
    given_id: str | None  # meta["id"] of the object given (the copies share it), or None: each gets its own
    large: bool  # whether it may be over policy.large_input_bytes (each copy is warned about)
    tool: bool  # a tool result (the batch then runs the policy check)
    boundary: bool  # a provider's compaction item


def _view_key(view: Sequence[Message]) -> bytes:
    """A digest of ``view``'s messages: their ids and what each says (its fingerprint), in order."""
    digest = hashlib.blake2b(digest_size=16)
    for m in view:
        digest.update(f"{m.meta.get('id', '')}\0{m.fingerprint()}\0".encode())
    return digest.digest()


def _worth_reading(batch: list[Message]) -> list[Message]:
    """The messages of one add() worth reading ahead of a compaction: all of them, or the two ends of a bulk add."""
    if len(batch) <= _READ_AHEAD_MAX:
        return batch
    return [*batch[:_READ_AHEAD_HEAD], *batch[-(_READ_AHEAD_MAX - _READ_AHEAD_HEAD):]]
