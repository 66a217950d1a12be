"""An object whose ``__class__`` claims int or float is not made one: its event is redacted, not dropped.

Reviewer 4 (s17): exact_values read isinstance(), which a ``__class__`` property fools; int.__int__ then raised
TypeError and the event was lost (and the OpenTelemetry exporter's emit raised).
"""

from __future__ import annotations

import uuid

import pytest

from contextfold.redact import Redactor
from contextfold.telemetry._session_redaction import exact_values, redacted_event

NONCE = uuid.uuid4().hex[:8]


def _claiming(kind: type) -> object:
    class Claims:
        @property  # type: ignore[misc]
        def __class__(self) -> type:
            return kind

    return Claims()


@pytest.mark.parametrize("kind", [int, float])
def test_an_object_claiming_a_figures_class_does_not_break_redaction(kind: type) -> None:
    value = _claiming(kind)
    assert isinstance(value, kind)  # (what fooled the old check)
    assert exact_values(value) is value and exact_values([value])[0] is value
    out = redacted_event(Redactor().redact_obj, {"name": f"rev4-{NONCE}", "attrs": [value], "one": value})
    assert out["name"] == f"rev4-{NONCE}"
    traced = redacted_event(Redactor().redact_obj, {"name": f"rev4-{NONCE}", "span_id": "0123456789abcdef",
                                                     "trace_id": value, "attrs": {"x": value}})
    assert traced["name"] == f"rev4-{NONCE}" and traced["span_id"] == "0123456789abcdef"
