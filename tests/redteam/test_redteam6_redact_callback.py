"""``Redactor(callback=)``: the callback sees each string once per session, not once per transcript.

issue 21 §1, the known hole "Redactor(callback=) re-redacts every transcript": with a callback the redactor kept no
result, so every compaction's transcript, summary input and status redacted every message of the view again, and
the operator's callback (a DLP service, an NER model) ran on the same strings at every compaction: its calls grew
with the session's length times its compactions. The callback is documented as a function of its input only.
"""

from __future__ import annotations

from collections import Counter

from contextfold.manager import ContextManager
from contextfold.messages import Message
from contextfold.redact import Redactor

SECRET = "Zq7-internal-codename-Orchid"


class Calls:
    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()

    def __call__(self, text: str) -> str:
        self.seen[text] += 1
        return text.replace(SECRET, "[REDACTED:codename]")


def history(n: int) -> list[Message]:
    out: list[Message] = []
    for i in range(n):
        out.append(Message("user", f"question {i}: what does module_{i} do? " + "context " * 30))
        out.append(Message("assistant", f"answer {i}: module_{i} builds {SECRET if i == 3 else 'the parser'}. "
                           + "detail " * 30))
    return out


def test_the_same_messages_redacted_twice_call_the_callback_once_per_string() -> None:
    calls = Calls()
    redactor = Redactor(callback=calls)
    messages = history(10)
    first = redactor.redact_messages(messages)
    once = sum(calls.seen.values())
    second = redactor.redact_messages(messages)
    assert second == first
    assert sum(calls.seen.values()) == once
    assert SECRET not in str([m.content for m in second]) and "[REDACTED:codename]" in str(second[7].content)
    assert redactor.redact_message(messages[7]) == first[7] and sum(calls.seen.values()) == once


def test_a_session_compacting_three_times_calls_the_callback_once_per_string() -> None:
    calls = Calls()
    cm = ContextManager(model="gpt-4o", max_context_tokens=4_000, store="memory", archive="memory",
                        session_id="rt6-callback", redact=Redactor(callback=calls))
    messages = history(24)
    for turn in range(3):
        cm.add(messages[turn * 16:(turn + 1) * 16])
        cm.prepare()
        cm.compact(force=True)
    cm.close()
    assert cm.compactions >= 3
    # (the events' strings, ids and timestamps, pass it too: each event is new)
    repeated = {text[:40]: n for text, n in calls.seen.items() if n > 1 and text.startswith(("question", "answer"))}
    assert repeated == {}
    assert cm.archive is not None
    archived = [m for _, ms in cm.archive.transcripts(cm.session_id) for m in ms]
    assert SECRET not in str([m.content for m in archived])
