"""An event's own ids, put back after redaction anyway, are not redacted by a contextfold redactor at all.

Each of an event's trace, span and parent ids went through the redactor (key rule, prefilter lookup or scan) only to
be restored after (issue 22: about a third of the telemetry thread's CPU per event of a no-op ``prepare()``). The
event's other values are redacted as before, the result is the same dict; a user's own hook and a redactor with a
callback (the user's last pass over every string) still see the ids.
"""

from __future__ import annotations

from typing import Any

from contextfold.redact import Redactor
from contextfold.telemetry import CompactWarning
from contextfold.telemetry._session_redaction import redacted_event

_NONCE = "w4k8p2"  # (texts of this test only: no cache of another test's can answer for them)
_IDS = {"trace_id": "0123456789abcdef" * 2, "span_id": "4111111111111111", "parent_id": "89abcdef01234567"}


def _record(**data: Any) -> dict[str, Any]:
    record = {**CompactWarning(message=f"tool {_NONCE} failed", session_id=f"s-{_NONCE}").to_dict(), **_IDS}
    record["data"] = {**record["data"], **data}
    return record


def _as_before(redactor: Redactor, record: dict[str, Any]) -> dict[str, Any]:
    redacted: dict[str, Any] = redactor.redact_obj(record)
    redacted.update({k: v for k, v in record.items() if k in _IDS})
    return redacted


def test_a_redactor_does_not_scan_the_ids_it_would_put_back() -> None:
    redactor = Redactor()
    seen: list[str] = []
    redact_text = redactor.redact_text

    def counting(text: str) -> str:
        seen.append(text)
        return redact_text(text)

    redactor.redact_text = counting  # type: ignore[method-assign]
    out = redacted_event(redactor.redact_obj, _record())
    assert not set(_IDS.values()) & set(seen), seen
    assert {k: out[k] for k in _IDS} == _IDS


def test_secrets_in_an_events_attributes_are_still_redacted() -> None:
    redactor = Redactor()
    secret = f"sk-{_NONCE}Q9vL2mX7rT4yB8nC1dF6gH3j"
    record = _record(tool=f"bash {secret}", error=f"auth failed: password={_NONCE}Zq81kW", meta={"api_key": secret},
                     figures=[1, 2.5, None, True])
    record["name"] = f"tool.{secret}"
    out = redacted_event(redactor.redact_obj, record)
    assert secret not in str(out) and f"{_NONCE}Zq81kW" not in str(out)
    assert out == _as_before(Redactor(), record)
    assert list(out) == list(record)  # (the same keys in the same order: the same bytes written)
    assert out["data"]["figures"] == [1, 2.5, None, True]


def test_an_id_that_is_no_id_of_ours_is_redacted() -> None:
    redactor = Redactor().for_telemetry()  # (it reads card numbers)
    record = {**_record(), "span_id": "4111111111111111 and more"}
    out = redacted_event(redactor.redact_obj, record)
    assert out["span_id"] == "[REDACTED:card_number] and more"


def test_a_users_hook_and_a_callback_still_see_the_ids() -> None:
    given: list[dict[str, Any]] = []

    def hook(record: dict[str, Any]) -> dict[str, Any]:
        given.append(dict(record))
        return record

    redacted_event(hook, _record())
    assert {k: given[0][k] for k in _IDS} == _IDS
    called: list[str] = []

    def callback(text: str) -> str:
        called.append(text)
        return text

    out = redacted_event(Redactor(callback=callback).redact_obj, _record())
    assert set(_IDS.values()) <= set(called)
    assert {k: out[k] for k in _IDS} == _IDS
