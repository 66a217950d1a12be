"""An event's figures are not handed to a contextfold redactor one by one; the redacted event is the same dict.

The key rule and ``redact_obj`` return a number, a bool and None as they are; each still cost a call chain on the
telemetry thread (issue 22: a no-op ``prepare()``'s two events carry ~20 figures, nested ones included).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.redact import Redactor
from contextfold.telemetry import TokenEstimate
from contextfold.telemetry._session_redaction import redacted_event

_NONCE = "f7q2zc"  # (texts of this test only: no cache of another test's can answer for them)
_IDS = ("trace_id", "span_id", "parent_id")


def _as_before(redactor: Redactor, record: dict[str, Any]) -> dict[str, Any]:
    redacted: dict[str, Any] = redactor.redact_obj(record)
    redacted.update({k: v for k, v in record.items() if k in _IDS})
    return redacted


def test_a_token_estimates_figures_never_reach_the_key_rule() -> None:
    redactor = Redactor()
    asked: list[tuple[str, Any]] = []
    item = redactor._redact_item

    def counting(key: str, value: Any) -> Any:
        asked.append((key, value))
        return item(key, value)

    redactor._redact_item = counting  # type: ignore[method-assign,assignment]
    record = TokenEstimate(system=1, developer=2, tools_schema=3, messages=4, model=f"m-{_NONCE}",
                           context_window=100, session_id=f"s-{_NONCE}").to_dict()
    out = redacted_event(redactor.redact_obj, record)
    assert all(isinstance(value, str) for _, value in asked), asked  # (figures, nested ones too, are not asked)
    assert out == _as_before(Redactor(), record)
    assert out["data"]["breakdown"] == {"system": 1, "developer": 2, "tools_schema": 3, "messages": 4}


_SECRET = f"sk-{_NONCE}Q9vL2mX7rT4yB8nC1dF6gH3j"
_texts = st.sampled_from(["ok", f"bash {_SECRET}", f"password={_NONCE}Zq81kW", "gpt-4o", "", "[REDACTED:x]"])
_figures = st.one_of(st.integers(), st.floats(allow_nan=False), st.booleans(), st.none())
_keys = st.sampled_from(["tool", "api_key", "password", "count", "data", "meta", "note"])
_values = st.recursive(st.one_of(_texts, _figures),
                       lambda inner: st.one_of(st.lists(inner, max_size=3),
                                               st.dictionaries(_keys, inner, max_size=4)), max_leaves=12)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(_keys, _values, max_size=5))
def test_the_redacted_event_is_the_one_redact_obj_gives(data: dict[str, Any]) -> None:
    record = {**TokenEstimate(system=0, developer=0, tools_schema=0, messages=1,
                              session_id=f"s-{_NONCE}").to_dict(), "data": data, "extra": data}
    out = redacted_event(Redactor().redact_obj, record)
    assert out == _as_before(Redactor(), record)
    assert list(out) == list(record)
    assert _SECRET not in str(out)
