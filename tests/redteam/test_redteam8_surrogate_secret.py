"""A secret holding a lone surrogate is redacted, not a crash (red team, eighth session; pre-existing on 44ddfa8).

Text decoded with ``errors="surrogateescape"`` (a tool's output of a file with a byte that is not UTF-8) holds lone
surrogates, and a credential may hold one: ``DB_PASSWORD=Xk9mQ3<\\udcff>horse77``. The scan found it, but learning
it raised ``UnicodeEncodeError`` (its URL-encoded forms were made with a strict UTF-8 encoding): ``redact_text``
raised, and a manager holding such an output could not compact (the secrets' catch-up before the summary raised
from ``compact()``), nor close cleanly.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.redact import Redactor

SECRET = "Xk9mQ3\udcffhorse77"


def test_a_secret_with_a_lone_surrogate_is_redacted_and_remembered() -> None:
    redactor = Redactor()
    assert redactor.redact_text(f"password={SECRET}") == "password=[REDACTED:password]"
    # (Remembered: bare, and in its JSON form, further on.)
    assert redactor.redact_text(f"echo {SECRET}") == "echo [REDACTED:password]"
    assert SECRET not in redactor.redact_text(json.dumps({"note": SECRET}))


def test_a_session_with_such_a_secret_compacts_and_archives_it_redacted() -> None:
    cm = ContextManager(model="gpt-4o", store="memory", archive="memory", session_id="rt8-surrogate-secret")
    call = ToolCall("c1", "bash", json.dumps({"command": "cat .env"}))
    cm.add([Message.system("You deploy."), Message.user("Check the settings."), Message.assistant("", [call]),
            Message.tool("c1", f"DB_PASSWORD={SECRET}\nDB_HOST=db.internal", name="bash")])
    cm.prepare_messages()
    cm.compact(force=True)
    cm.close()
    assert cm.archive is not None
    archived = [m.text for _, messages in cm.archive.transcripts(cm.session_id) for m in messages]
    assert "DB_PASSWORD=[REDACTED:password]\nDB_HOST=db.internal" in archived
    assert not any("horse77" in text for text in archived)


@settings(max_examples=40, deadline=None)
@given(st.text(alphabet="ABCdef0123456789xyzQ!#%", min_size=8, max_size=24), st.integers(0, 24),
       st.sampled_from(["\udc80", "\udcff", "\ud800", "\udfff"]),
       st.sampled_from(["password={}", "export API_KEY={}", '{{"client_secret": "{}"}}', "PGPASSWORD={} psql"]))
def test_values_with_a_lone_surrogate_never_crash_the_redaction(value: str, at: int, surrogate: str,
                                                                 template: str) -> None:
    secret = value[:at] + surrogate + value[at:]
    redactor = Redactor()
    redacted = redactor.redact_text(template.format(secret))  # (raised UnicodeEncodeError for what it learned)
    if "[REDACTED:" in redacted:
        assert secret not in redacted
        assert secret not in redactor.redact_text(f"seen again: {secret}")
