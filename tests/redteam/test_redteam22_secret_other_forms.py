"""A learned secret repeated in the other forms tools write it in reaches no output (older defects, left open by 21).

The memory remembered a value with the forms everyday encoders write whole (JSON, URL, HTML, base64), and each went
out in clear on afa4c7c when written otherwise: in the other case (a hex digest upper-cased), as hex (``xxd -p``),
as base64 inside a longer blob (the value at any of three byte alignments: a Kubernetes Secret, a Basic header),
with HTML's numeric references (``&#x2F;``, ``&#47;``) or JSON's ``\\u`` escapes of letters (``\\u0070assword``, or
every character), broken by a line break (base64 wrapped at 76 columns, a shell ``\\`` continuation, a JSON
string's ``\\n``), URL-encoded twice, or with ``~`` escaped (old .NET). Bounded forms are remembered as strings
(other case, twice encoded, ``%7E``); the rest is found in a text's view (escapes read, wrapped tokens joined) and
its base64 and hex runs decoded (``contextfold.redact._views``).
"""

from __future__ import annotations

import base64
import contextlib
import html
import json
import re
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold import ContextManager
from contextfold.archive import Archive, MemoryArchiveStore
from contextfold.messages import Message, ToolCall
from contextfold.providers import get_provider
from contextfold.redact import Redactor
from contextfold.stores.memory import MemoryBlobStore
from contextfold.summarize.llm import LLMSummarizer
from contextfold.telemetry import BatchProcessor
from contextfold.testing.server import ScriptedLLMServer
from contextfold.tokens import EstimatingCounter

NONCE = "rt22f0rms"
SECRET = "Rt22/Kw8+Pq3~Zx7!Nv5"  # (punctuation each encoder treats apart)
HEX_TOKEN = "9f2c4e81b7d04a6c3e5f1a2b"  # (a hex token: its digest printed in upper case by another tool)
UPPER_KEY = "ZX81QK29LM47RT22"
COUNTER = EstimatingCounter()


def _base64_inside(before: bytes) -> Callable[[str], str]:
    def encode(value: str) -> str:
        return base64.b64encode(before + value.encode() + b";next=1").decode()
    return encode


def _wrapped_at_76(value: str) -> str:
    blob = base64.b64encode(b"apiVersion: v1\nkind: Secret\ndata:\n  key: " + value.encode() + b"\n" * 3 + b"x" * 40)
    text = blob.decode()
    return "\n".join(text[i : i + 76] for i in range(0, len(text), 76))


def _html_numeric(value: str) -> str:
    return "".join(c if c.isalnum() else f"&#x{ord(c):02X};" for c in value)


def _html_decimal(value: str) -> str:
    return "".join(c if c.isalnum() else f"&#{ord(c)};" for c in value)


def _json_every_char(value: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in value)


def _json_some_letters(value: str) -> str:
    return "".join(f"\\u{ord(c):04x}" if i % 3 == 0 else c for i, c in enumerate(value))


def _shell_continued(value: str) -> str:
    return f"curl -H 'X-Key: {value[:9]}\\\n    {value[9:]}' https://api.example.com"


def _json_wrapped(value: str) -> str:
    blob = base64.b64encode(b"A" * 40 + value.encode() + b"B" * 40).decode()
    return json.dumps({"cert": "\n".join(blob[i : i + 64] for i in range(0, len(blob), 64))})


def _folded_log_line(value: str) -> str:
    line = f"2026-11-27T21:40:00Z INFO sending request to the deploy hook with the key {value}-{NONCE} attached"
    return "\n".join(line[i : i + 76] for i in range(0, len(line), 76))


# name -> (the value it encodes, the encoder)
FORMS: dict[str, tuple[str, Callable[[str], str]]] = {
    "upper_case_hex_token": (HEX_TOKEN, str.upper),
    "lower_case_key": (UPPER_KEY, str.lower),
    "hex": (SECRET, lambda v: v.encode().hex()),
    "hex_upper": (SECRET, lambda v: v.encode().hex().upper()),
    "base64_inside_0": (SECRET, _base64_inside(b"id=")),
    "base64_inside_1": (SECRET, _base64_inside(b"ref=")),
    "base64_inside_2": (SECRET, _base64_inside(b"note=")),
    "base64url_inside": (SECRET, lambda v: base64.urlsafe_b64encode(b"{\"k\":\"" + v.encode() + b"\"}").decode()),
    "base64_wrapped_at_76": (SECRET, _wrapped_at_76),
    "html_hex_references": (SECRET, _html_numeric),
    "html_decimal_references": (SECRET, _html_decimal),
    "html_named_slash": (SECRET, lambda v: v.replace("/", "&sol;").replace("+", "&plus;")),
    "json_every_char": (SECRET, _json_every_char),
    "json_some_letters": (SECRET, _json_some_letters),
    "shell_continued": (SECRET, _shell_continued),
    "json_wrapped_base64": (SECRET, _json_wrapped),
    "folded_log_line": (SECRET, _folded_log_line),
    "url_twice": (SECRET, lambda v: urllib.parse.quote(urllib.parse.quote(v, safe=""), safe="")),
    "url_tilde_escaped": (SECRET, lambda v: urllib.parse.quote(v, safe="").replace("~", "%7E")),
    "url_tilde_lower": (SECRET, lambda v: re.sub("%..", lambda m: m.group().lower(),
                                                 urllib.parse.quote(v, safe="").replace("~", "%7E"))),
}


def _taught() -> Redactor:
    redactor = Redactor()
    for value in {value for value, _ in FORMS.values()}:
        assert redactor.redact_text(f"password: {value}") == "password: [REDACTED:password]"
    return redactor


def _leaks(value: str, written: str) -> list[str]:
    """What of ``value`` can still be read in ``written``: the value, once every form ``FORMS`` uses is undone."""
    readings = [written, written.lower(), written.upper()]
    joined = written.replace("\\\n    ", "").replace("\\n", "").replace("\n", "")
    readings.append(joined)
    for text in (written, joined):
        readings.append(urllib.parse.unquote(urllib.parse.unquote(text)))
        readings.append(text.encode().decode("unicode_escape", errors="replace"))
        readings.append(html.unescape(text))
        for run in _runs(text):
            for alphabet in (base64.b64decode, base64.urlsafe_b64decode):
                with contextlib.suppress(ValueError):
                    readings.append(alphabet(run[: len(run) // 4 * 4]).decode("latin-1"))
            with contextlib.suppress(ValueError):
                readings.append(bytes.fromhex(run[: len(run) // 2 * 2]).decode("latin-1"))
    return [reading for reading in readings if value.lower() in reading.lower()]


def _runs(text: str) -> list[str]:
    return re.findall(r"[A-Za-z0-9+/_-]{8,}", text)


@pytest.mark.parametrize("form", sorted(FORMS))
def test_each_form_of_a_learned_secret_is_redacted(form: str) -> None:
    value, encode = FORMS[form]
    written = encode(value)
    assert _leaks(value, written), f"the test's own reading misses {form}"
    redacted = _taught().redact_text(f"output {NONCE}:\n{written}\nend")
    assert "[REDACTED:" in redacted
    assert not _leaks(value, redacted), (form, redacted)


def test_a_secret_learned_after_a_text_was_redacted_is_found_in_its_forms_then() -> None:
    # The ledger keeps a message's redaction until a string learned since occurs in it: the forms found only in a
    # text's view or its decoded runs leave a needle of theirs in it (an escape's opening, a half of the value's
    # base64 or hex), so the message is redacted again.
    messages = [Message.tool(f"c{i}", f"{form}: {encode(value)}", meta={"id": f"{NONCE}:{i}"})
                for i, (form, (value, encode)) in enumerate(sorted(FORMS.items()))]
    redactor = Redactor(builtin=False)  # (a rule reads some of the blobs: here only the memory finds)
    assert redactor.redact_messages(messages) == messages  # (nothing known yet)
    for value in {value for value, _ in FORMS.values()}:
        redactor.learn(value, "password")
    for m, redacted in zip(messages, redactor.redact_messages(messages), strict=True):
        value = FORMS[m.text.partition(":")[0]][0]
        assert not _leaks(value, redacted.text), m.text


def test_a_short_or_mixed_case_value_is_not_matched_in_another_case() -> None:
    # A value in another case is matched only for a value of 12 characters or more switching between letters and
    # digits, written in one case: "Hunter2" must not be redacted from every HUNTER2 of a config, and a mixed-case
    # key re-cased is another string.
    redactor = Redactor()
    redactor.learn("Hunter2", "password")
    redactor.learn("wJalrXUtnFEMI9K7MDENG8bPxRfiCY", "aws_secret")
    text = "HUNTER2 hunter2 wjalrxutnfemi9k7mdeng8bpxrficy WJALRXUTNFEMI9K7MDENG8BPXRFICY"
    assert redactor.redact_text(text) == text


@settings(max_examples=60, deadline=None)
@given(st.text("abcdefghkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789/+=!~-_.", min_size=10, max_size=30)
       .filter(lambda v: sum(c.isdigit() for c in v) >= 2 and sum(c.isalpha() for c in v) >= 2),
       st.binary(max_size=7), st.sampled_from(sorted(FORMS)))
def test_no_form_of_a_learned_value_is_left_readable(value: str, before: bytes, form: str) -> None:
    # An invariant: whatever the value, whatever stands before it in a blob, and whichever encoder wrote it, the
    # redacted text gives the value back by no reading of it.
    encode = FORMS[form][1]
    if form in ("upper_case_hex_token", "lower_case_key"):
        return  # (the other case is for single-case values: the two examples above)
    if form in ("folded_log_line", "shell_continued") and len(value) < 12:
        return  # (a line break is looked for in a value of 12 characters or more: see _views.view_needles)
    written = encode(value) if not form.startswith("base64_inside") else base64.b64encode(
        before + value.encode() + b"!").decode()
    redactor = Redactor(builtin=False)
    redactor.learn(value, "password")
    redacted = redactor.redact_text(f"got {written} here")
    assert not _leaks(value, redacted), (form, written, redacted)


# -- end to end: archive, the summarizer's prompt, the model's view, placeholders' digests, telemetry -------------

class _Exported:
    def __init__(self) -> None:
        self.events: list[Any] = []

    def export(self, batch: Any) -> None:
        self.events.extend(batch)


@pytest.fixture
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(counter=COUNTER) as s:
        yield s


def test_no_form_reaches_the_archive_the_summarizer_the_model_or_telemetry(server: ScriptedLLMServer) -> None:
    summary = f"<summary>## Goal\nDeploy {NONCE}</summary>\n<retain>\n- {NONCE}\n</retain>"
    for _ in range(4):
        server.push(summary)
    provider = get_provider("openai:gpt-4o-mini", base_url=server.base_url, api_key="test", max_retries=0)
    store = MemoryArchiveStore()
    exported = _Exported()
    processor = BatchProcessor(exported)
    cm = ContextManager(model="gpt-4o", max_context_tokens=6_000, store=MemoryBlobStore(),
                        summarizer=LLMSummarizer(provider, counter=COUNTER), archive=Archive(store),
                        session_id=f"rt22-{NONCE}", redact=Redactor(apply_to_model=True), telemetry=processor)
    cm.add([Message.system("You deploy services."),
            Message.user(f"The deploy password: {SECRET}; the build token: {HEX_TOKEN}; LICENSE_SECRET={UPPER_KEY}")])
    for number, form in enumerate(sorted(FORMS)):
        value, encode = FORMS[form]
        call = ToolCall(f"call_{number}", "bash", json.dumps({"cmd": f"cat config-{number}.txt"}))
        cm.add([Message.assistant(f"Reading config {number}.", [call]),
                Message.tool(f"call_{number}", f"config {number} ({form}):\n{encode(value)}\n" + "ok\n" * 40,
                             name="bash")])
    seen = [json.dumps(cm.prepare())]
    for turn in range(6):
        cm.add([Message.user(f"Check service {turn} of {NONCE}."), Message.assistant(f"Service {turn} is up.")])
        seen.append(json.dumps(cm.prepare()))
    cm.compact(force=True)
    seen.append(json.dumps(cm.prepare()))
    cm.close()
    processor.shutdown()
    assert server.requests, "the LLM summarizer was not called"
    assert exported.events, "no telemetry was exported"
    outputs = {
        "summarizer prompts": [json.loads(json.dumps(request.body)) for request in server.requests],
        "archive": b"".join(bytes(data) for data in store._files.values()).decode("utf-8"),
        "model views": seen,
        "telemetry": json.dumps(exported.events, default=str),
    }
    for where, written in outputs.items():
        text = written if isinstance(written, str) else json.dumps(written)
        for reading in (text, json.loads(json.dumps(text))):
            # (Read as JSON too: a form inside a JSON document is escaped once more.)
            unescaped = reading.encode().decode("unicode_escape", errors="replace") if "\\" in reading else reading
            for value in (SECRET, HEX_TOKEN, UPPER_KEY):
                assert not _leaks(value, unescaped), (where, value)
