"""add() is all or nothing: a raise from the world it calls leaves the manager as if the batch never came.

Left open at the fifteenth session's stop (a raise late in ``add()``, after narrowing, was never audited). On
309338f a failure after the batch was appended (the redactor's callback reading the batch ahead, the archive of a
provider's compaction item, the trigger check) raised with the batch in the view: the caller's retry added it
twice (a duplicated tool call the provider refuses). A failure before it (the archive of a result answering no call)
moved the id sequence, so a retry's ids were not those of a session that never failed. Now what can fail runs
before the commit, the provider item's archive takes the batch out again, and the check's errors are reported.
"""

from __future__ import annotations

import datetime
import itertools
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextfold import ContextManager
from contextfold.errors import StoreError
from contextfold.messages import Message, UnknownPart

NONCE = "r16aon7q"
_T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


class Interrupt(BaseException):
    """What a callback may raise that is not an Exception (KeyboardInterrupt, SystemExit, a cancellation)."""


class _Sink:
    """A telemetry sink that raises ``fault`` on the ``at``-th event it is given while armed."""

    def __init__(self) -> None:
        self.armed: Callable[[Any], None] | None = None

    def emit(self, event: Any) -> None:
        if self.armed is not None:
            self.armed(event)


def _manager(sink: _Sink | None = None) -> ContextManager:
    ticks = itertools.count()
    cm = ContextManager(model="gpt-4o", max_context_tokens=3000, store="memory", archive="memory",
                        session_id=NONCE, message_id_prefix="m", archive_events=False,
                        telemetry=sink, clock=lambda: _T0 + datetime.timedelta(seconds=next(ticks)))
    cm.counter.wait_exact()  # (exact counts from the start: the same decisions whenever the tokenizer loads)
    return cm


def _call(call_id: str, name: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": '{"path": "a.py"}'}}


def _boundary(n: int) -> Message:
    return Message("assistant", (UnknownPart({"type": "compaction", "content": f"summary {n} {NONCE}"},
                                             format="anthropic"),))


# A batch: a turn (calls made, answered, whether the outputs are big: cut at write time and shown wider when
# answered, whether it ends with a result answering no call), a user message, or a provider's compaction item.
_TURN = st.tuples(st.just("turn"), st.integers(0, 2), st.integers(0, 2), st.booleans(), st.booleans())
_BATCH = _TURN | st.tuples(st.just("user")) | st.tuples(st.just("boundary"))


def _batches(plan: list[tuple[Any, ...]]) -> list[list[Any]]:
    out: list[list[Any]] = [[{"role": "system", "content": f"system {NONCE}"},
                             {"role": "user", "content": f"task {NONCE} " * 20}]]
    for n, (kind, *args) in enumerate(plan):
        if kind == "user":
            out.append([{"role": "user", "content": f"next {n} {NONCE}"}])
        elif kind == "boundary":
            out.append([_boundary(n), {"role": "user", "content": f"after {n} {NONCE}"}])
        else:
            made, answered, big, orphan = args
            ids = [f"c{n}_{k}" for k in range(made)]
            batch: list[Any] = [{"role": "assistant", "content": f"turn {n} {NONCE}",
                                 "tool_calls": [_call(i, f"tool{k}") for k, i in enumerate(ids)]}]
            batch += [{"role": "tool", "tool_call_id": i, "content": f"out {i} {NONCE} line\n" * (200 if big else 5)}
                      for i in ids[:answered]]
            if orphan:
                batch.append({"role": "tool", "tool_call_id": f"gone{n}", "content": f"late {n} {NONCE}"})
            out.append(batch)
    return out


def _seen(cm: ContextManager) -> list[tuple[Any, ...]]:
    return [(m.role, m.text, m.tool_call_id, tuple((c.id, c.name) for c in m.tool_calls), dict(m.meta))
            for m in cm.messages()]


def _ids(cm: ContextManager) -> list[Any]:
    return [m.meta.get("id") for m in cm._view.raw]  # (not stored_messages(): it learns, so redacts, first)


def _check_pairing(wire: list[dict[str, Any]]) -> None:
    open_calls: set[str] = set()
    for item in wire:
        if item["role"] == "assistant":
            for c in item.get("tool_calls") or ():
                assert c["id"] not in open_calls, c  # (a call given twice)
                open_calls.add(c["id"])
        elif item["role"] == "tool":
            assert item["tool_call_id"] in open_calls, item
            open_calls.discard(item["tool_call_id"])
    assert not open_calls, open_calls


def _same(cm: ContextManager, ref: ContextManager) -> None:
    assert _seen(cm) == _seen(ref)
    wire = cm.prepare("openai_chat")
    assert wire == ref.prepare("openai_chat")
    _check_pairing(wire)
    assert _seen(cm) == _seen(ref)  # (and after what prepare() did: masking, compaction)
    assert cm.steering.messages_since_compaction == ref.steering.messages_since_compaction
    assert cm._economics.added_tokens == ref._economics.added_tokens


def _arm(cm: ContextManager, sink: _Sink, where: str, nth: int, error: BaseException) -> tuple[Callable[[], None],
                                                                                           list[bool]]:
    """Make the ``nth`` call at ``where`` raise ``error``; returns (disarm, [whether the batch was in by then])."""
    calls = itertools.count()
    committed = [False]
    first_new = f"m:{cm._seq + 1}"  # (the id the batch's first message gets)

    def maybe_raise(event: Any = None) -> None:
        if next(calls) == nth:
            committed[0] = any(m.meta.get("id") == first_new for m in cm._view.raw)
            raise error

    undo: list[Callable[[], None]] = []

    def wrap(obj: Any, name: str) -> None:
        original = getattr(obj, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            maybe_raise()
            return original(*args, **kwargs)

        setattr(obj, name, wrapper)
        undo.append(lambda: setattr(obj, name, original))

    if where == "blob store":
        for name in ("put", "put_many"):  # (a new output, its index and its claim are written in one put_many)
            wrap(cm.cache.store, name)  # type: ignore[union-attr]
    elif where == "archive store":
        for name in _ARCHIVE_WRITES:
            wrap(cm.archive.store, name)  # type: ignore[union-attr]
    elif where == "tokenizer":
        wrap(cm.counter, "count_each")
    elif where == "redactor callback":
        def callback(text: str) -> str:
            maybe_raise()
            return text

        cm.redactor.callback = callback  # type: ignore[union-attr]
        undo.append(lambda: setattr(cm.redactor, "callback", None))
    else:
        sink.armed = maybe_raise
        undo.append(lambda: setattr(sink, "armed", None))

    def disarm() -> None:
        for step in undo:
            step()

    return disarm, committed


_ARCHIVE_WRITES = ("write", "write_chunks", "append")
_WHERE = st.sampled_from(["blob store", "archive store", "tokenizer", "redactor callback", "telemetry sink"])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=st.lists(_BATCH, min_size=2, max_size=6), data=st.data(), where=_WHERE, nth=st.integers(0, 3),
       interrupt=st.booleans())
def test_a_failing_add_leaves_the_manager_as_if_never_called(plan: list[tuple[Any, ...]], data: st.DataObject,
                                                             where: str, nth: int, interrupt: bool) -> None:
    sink = _Sink()
    cm, ref = _manager(sink), _manager()
    batches = _batches(plan)
    failing = data.draw(st.integers(1, len(batches) - 1), label="failing batch")
    for batch in batches[:failing]:
        cm.add(batch)
        ref.add(batch)
        _same(cm, ref)
    before = _ids(cm)
    error: BaseException = Interrupt(NONCE) if interrupt else StoreError(f"down {NONCE}")
    disarm, _ = _arm(cm, sink, where, nth, error)
    try:
        cm.add(batches[failing])
        raised = False
    except (Interrupt, StoreError):
        raised = True
    finally:
        disarm()
    ref.add(batches[failing])
    if raised:  # (an interrupt too, once the batch was in: the view's count, the check's sink; c04dd8d kept it in)
        assert _ids(cm) == before, "raised with the batch in"
        cm.add(batches[failing])  # the caller's retry: the batch comes once
    _same(cm, ref)
    for batch in batches[failing + 1:]:
        cm.add(batch)
        ref.add(batch)
        _same(cm, ref)
    cm.close()
    ref.close()


def _past_half_the_soft_threshold(cm: ContextManager) -> None:
    cm.add([{"role": "system", "content": f"system {NONCE}"}, {"role": "user", "content": f"task {NONCE} " * 20}])
    for n in range(4):
        cm.add([{"role": "assistant", "content": f"turn {n}", "tool_calls": [_call(f"a{n}", "read")]},
                {"role": "tool", "tool_call_id": f"a{n}", "content": f"out {n} {NONCE} line\n" * 30}])
    assert cm._intake.reading  # (add() reads what it adds: the redactor's callback runs in it)


def test_a_raising_redaction_callback_adds_nothing() -> None:
    """On 309338f the batch stayed in the view: the retry sent call b1 twice."""
    cm = _manager()
    _past_half_the_soft_threshold(cm)
    before = _ids(cm)
    batch = [{"role": "assistant", "content": f"next {NONCE}", "tool_calls": [_call("b1", "read")]},
             {"role": "tool", "tool_call_id": "b1", "content": f"fresh output {NONCE} 91e3\n" * 3}]

    def callback(text: str) -> str:
        raise Interrupt("the operator's DLP service was cancelled")

    cm.redactor.callback = callback  # type: ignore[union-attr]
    with pytest.raises(Interrupt):
        cm.add(batch)
    assert _ids(cm) == before
    cm.redactor.callback = None  # type: ignore[union-attr]
    cm.add(batch)
    wire = cm.prepare("openai_chat")
    _check_pairing(wire)
    assert sum(1 for item in wire if item.get("tool_call_id") == "b1") == 1
    cm.close()


def _archive_down(cm: ContextManager, down: bool) -> None:
    """Every write to ``cm``'s archive raises StoreError while ``down``."""
    store = cm.archive.store  # type: ignore[union-attr]

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise StoreError(f"archive down {NONCE}")

    for name in _ARCHIVE_WRITES:
        if down:
            setattr(store, name, fail)
        else:
            delattr(store, name)


def test_a_failed_archive_of_an_unanswered_result_leaves_no_gap_in_the_ids() -> None:
    """On 309338f the sequence moved before that archive: the retry's ids skipped the failed batch's."""
    cm, ref = _manager(), _manager()
    for m in (cm, ref):
        m.add([{"role": "user", "content": f"task {NONCE}"}])
    batch = [{"role": "assistant", "content": f"a {NONCE}"},
             {"role": "tool", "tool_call_id": "nobody", "content": f"late {NONCE}"}]
    _archive_down(cm, True)
    with pytest.raises(StoreError):
        cm.add(batch)
    _archive_down(cm, False)
    cm.add(batch)
    ref.add(batch)
    assert [m.meta["id"] for m in cm.messages()] == [m.meta["id"] for m in ref.messages()]
    cm.close()
    ref.close()


def test_a_failed_archive_of_a_provider_compaction_takes_the_batch_out() -> None:
    """What a provider's compaction item replaced is archived after the commit: a failure there undoes the add."""
    cm = _manager()
    _past_half_the_soft_threshold(cm)
    before = cm.stored_messages()
    _archive_down(cm, True)
    with pytest.raises(StoreError):
        cm.add([_boundary(1), {"role": "user", "content": f"after {NONCE}"}])
    assert cm.stored_messages() == before
    assert cm._seq == len(before)
    _archive_down(cm, False)
    cm.add([_boundary(1), {"role": "user", "content": f"after {NONCE}"}])
    assert [m.role for m in cm.messages()] == ["system", "assistant", "user"]
    cm.close()


def _with_a_duplicate_result(cm: ContextManager) -> None:
    """A turn whose call was answered twice: normalization drops the second answer, for the archive."""
    cm.add([{"role": "user", "content": f"task {NONCE}"},
            {"role": "assistant", "content": None, "tool_calls": [_call("d1", "read")]},
            {"role": "tool", "tool_call_id": "d1", "content": f"first answer {NONCE}"},
            {"role": "tool", "tool_call_id": "d1", "content": f"second answer {NONCE}"}])


def _archived_texts(cm: ContextManager) -> list[str]:
    assert cm.archive is not None
    return [m.text for _, messages in cm.archive.transcripts(NONCE) for m in messages]


def test_what_normalization_dropped_stays_owed_when_its_archive_fails() -> None:
    """On b52e09e view.dropped was emptied before its archive: a failing one lost the duplicate answer for good."""
    cm = _manager()
    _with_a_duplicate_result(cm)
    cm.add([{"role": "assistant", "content": f"done {NONCE}"}, {"role": "user", "content": f"next {NONCE}"},
            {"role": "assistant", "content": f"ok {NONCE}"}, {"role": "user", "content": f"more {NONCE}"}])
    cm._view.normalized()  # (settled past the duplicate: dropped, owed to the archive)
    assert len(cm._view.dropped) == 1
    orphan = [{"role": "tool", "tool_call_id": "nobody", "content": f"orphan {NONCE}"}]
    _archive_down(cm, True)
    with pytest.raises(StoreError):
        cm.add(orphan)
    _archive_down(cm, False)
    cm.add(orphan)  # (the caller's retry)
    cm.archive_view()
    archived = _archived_texts(cm)
    assert sum(f"second answer {NONCE}" in t for t in archived) == 1
    assert sum(f"orphan {NONCE}" in t for t in archived) == 1
    cm.close()


def test_a_rolled_back_provider_compaction_leaves_nothing_to_archive_twice() -> None:
    """Normalizing the view for the item's archive dropped the duplicate again; the rollback kept that drop, and the
    retry archived the duplicate a second time (b52e09e)."""
    cm = _manager()
    _with_a_duplicate_result(cm)
    cm.prepare("openai_chat")  # (the duplicate is dropped and archived here)
    assert cm._view.dropped == []
    batch = [{"role": "user", "content": f"go on {NONCE}"}, _boundary(1), {"role": "user", "content": f"after {NONCE}"}]
    _archive_down(cm, True)
    with pytest.raises(StoreError):
        cm.add(batch)
    assert cm._view.dropped == []
    _archive_down(cm, False)
    cm.add(batch)
    cm.prepare("openai_chat")
    cm.archive_view()
    assert sum(f"second answer {NONCE}" in t for t in _archived_texts(cm)) == 1
    cm.close()


def test_a_failing_check_after_tool_results_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check runs once the batch is in: raising told the caller it was not added (309338f)."""
    cm = _manager()
    cm.add([{"role": "user", "content": f"task {NONCE}"}])

    def broken(where: str = "check") -> Any:
        raise RuntimeError(f"check broke {NONCE}")

    monkeypatch.setattr(cm, "check", broken)
    batch = [{"role": "assistant", "content": f"a {NONCE}", "tool_calls": [_call("k1", "read")]},
             {"role": "tool", "tool_call_id": "k1", "content": f"out {NONCE}"}]
    cm.add(batch)  # raised RuntimeError, the batch in
    assert [m.tool_call_id for m in cm.messages()][-1] == "k1"
    monkeypatch.undo()
    _check_pairing(cm.prepare("openai_chat"))
    cm.close()


@pytest.mark.parametrize("where", ["count", "check"])
def test_an_interrupt_once_the_batch_is_in_takes_it_out(monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    """The view's count and the trigger check run once the batch is in: an interrupt there left it in (c04dd8d),
    and the caller's retry sent the call twice."""
    cm, ref = _manager(), _manager()
    for m in (cm, ref):
        m.add([{"role": "user", "content": f"task {NONCE} interrupted"}])
    batch = [{"role": "assistant", "content": f"a {NONCE}", "tool_calls": [_call("i1", "read")]},
             {"role": "tool", "tool_call_id": "i1", "content": f"out {NONCE} interrupted"}]
    before = _ids(cm)

    counted = cm._view.totals

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        if len(cm._view.raw) == len(before):  # (the count before the commit: not this test's)
            return counted(*args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(cm, "check", interrupted) if where == "check" else monkeypatch.setattr(
        cm._view, "totals", interrupted)
    with pytest.raises(KeyboardInterrupt):
        cm.add(batch)
    monkeypatch.undo()
    assert _ids(cm) == before
    cm.add(batch)  # (the caller's retry)
    ref.add(batch)
    _same(cm, ref)
    cm.close()
    ref.close()
