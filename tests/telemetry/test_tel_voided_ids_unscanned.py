"""A rolled-back add()'s ``voided`` span ids are ours, spared by telemetry redaction as the event's own span id is.

Review of lane S (eighteenth stop): a span id of 16 decimal digits passing the Luhn check (about 1 in 18,000 of
``new_span_id``'s) became "[REDACTED:card_number]" in ``voided`` while kept as the voided event's own ``span_id``: the
void no longer named the event it voids.
"""
from __future__ import annotations

from typing import Any

from contextfold.redact import Redactor
from contextfold.telemetry import AddRolledBack, TriggerDecision
from contextfold.telemetry._session_redaction import redacted_event

SPAN = "4111111111111111"  # 16 hex characters, all decimal, Luhn-valid: a span id new_span_id can return
NONCE = "f2vd8n4x"


def _rolled(voided: tuple[str, ...]) -> AddRolledBack:
    return AddRolledBack(session_id=f"s-{NONCE}", trace_id="0" * 32, span_id="abcdefabcdefabcd", ids=(f"m-{NONCE}",),
                         voided=voided, error_type="KeyboardInterrupt")


def test_voided_span_ids_survive_redaction_like_the_span_id() -> None:
    r = Redactor().for_telemetry()
    pruned = TriggerDecision(session_id=f"s-{NONCE}", span_id=SPAN, trace_id="0" * 32, triggered=True, reason="x")
    kept = redacted_event(r.redact_obj, pruned.to_dict())
    record = _rolled((SPAN, "abcdef0123456789")).to_dict()
    out = redacted_event(r.redact_obj, record)
    assert kept["span_id"] == SPAN
    assert list(out["data"]["voided"]) == [SPAN, "abcdef0123456789"]
    assert list(out["data"]) == list(record["data"])  # (in its place among the figures)
    assert out["data"]["ids"] == record["data"]["ids"]


def test_voided_ids_spared_through_a_users_hook_too() -> None:
    seen: list[Any] = []

    def hook(record: dict[str, Any]) -> dict[str, Any]:
        seen.append(record["data"].get("voided"))
        return Redactor().redact_obj(record)

    out = redacted_event(hook, _rolled((SPAN,)).to_dict())
    assert list(out["data"]["voided"]) == [SPAN]
    assert seen == [None]  # (the hook never saw them to redact)


def test_a_voided_value_that_is_no_id_of_ours_is_redacted() -> None:
    secret = f"ghp_{NONCE}a1B2c3D4e5F6g7H8i9J0k1L2m3N4"
    out = redacted_event(Redactor().for_telemetry().redact_obj, _rolled((SPAN, secret)).to_dict())
    assert secret not in repr(out)
