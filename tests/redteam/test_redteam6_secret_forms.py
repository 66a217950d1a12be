"""Secrets in forms and positions not planted before, scanned in the archive's transcripts (issue 21 §1).

A value is taught in context first (``password: X``, so the session remembers it), then appears elsewhere: encoded
(URL, base64), inside provider reasoning (a Responses reasoning summary with encrypted content, an Anthropic signed
thinking block), in a document's file name, a participant name, an image URL, tool-call arguments, a second text
part. The archive must hold none of them in any form. Those that leak are marked ``xfail(strict=True)``: they are in
``redact/`` (the cold6 lane's this session) and reported, not fixed here.
"""

from __future__ import annotations

import base64
import json
import urllib.parse
from typing import Any

import pytest

from contextfold.manager import ContextManager
from contextfold.serialize import message_to_dict

SECRET = "Zp9#Lq2!vXr8$Tm4"
VARIANTS = {"bare": SECRET, "url": urllib.parse.quote(SECRET, safe=""),
            "base64": base64.b64encode(SECRET.encode()).decode(), "json": json.dumps(SECRET)[1:-1],
            "piece": SECRET[:10]}


def archived_forms(name: str, messages: list[dict[str, Any]], fmt: str | None = None) -> list[str]:
    """The forms of SECRET found in the transcripts after the session taught it and then saw ``messages``."""
    cm = ContextManager(model="gpt-4o", store="memory", archive="memory", session_id=f"rt6-forms-{name}")
    cm.add([{"role": "user", "content": f"Use the database password: {SECRET} for staging."},
            {"role": "assistant", "content": "ok"}])
    cm.add(messages, **({"format": fmt} if fmt else {}))
    cm.add([{"role": "user", "content": "and now the next step " + "filler " * 40}])
    cm.compact(force=True)
    cm.close()
    assert cm.archive is not None
    blob = json.dumps([message_to_dict(m) for _, ms in cm.archive.transcripts(cm.session_id) for m in ms])
    return [form for form, value in VARIANTS.items() if value in blob]


HELD: dict[str, tuple[list[dict[str, Any]], str | None]] = {
    "image_url_credentials": ([{"role": "user", "content": [
        {"type": "text", "text": "see"},
        {"type": "image_url", "image_url": {"url": f"https://admin:{SECRET}@img.internal/a.png"}}]}], None),
    "tool_call_arguments": ([{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "login", "arguments": json.dumps({"pw": SECRET})}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"}], None),
    "second_text_part": ([{"role": "user", "content": [{"type": "text", "text": "part one says "},
                                                       {"type": "text", "text": SECRET}]}], None),
    "refusal": ([{"role": "assistant", "content": None, "refusal": f"I will not use {SECRET}"}], None),
    "url_citation": ([{"type": "message", "role": "assistant", "content": [
        {"type": "output_text", "text": "see link", "annotations": [
            {"type": "url_citation", "url": f"https://x.internal/?pw={SECRET}", "title": "t", "start_index": 0,
             "end_index": 3}]}]}], "openai_responses"),
    "reasoning_summary_plain": ([
        {"type": "reasoning", "id": "rs_2", "summary": [{"type": "summary_text", "text": f"password {SECRET}"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]}],
        "openai_responses"),
}


@pytest.mark.parametrize("name", sorted(HELD))
def test_a_remembered_secret_never_reaches_the_archive(name: str) -> None:
    messages, fmt = HELD[name]
    assert archived_forms(name, messages, fmt) == []


def _lane(reason: str) -> Any:
    return pytest.mark.xfail(strict=True, reason=f"redact/ (cold6's lane this session): {reason}")


LEAKS = [
    pytest.param("url_encoded", [{"role": "user", "content": (
        f"curl 'https://db.internal/login?pw={urllib.parse.quote(SECRET, safe='')}'")}], None, id="url_encoded"),
    pytest.param("base64_of_bare", [{"role": "user", "content": (
        f"the encoded pw is {base64.b64encode(SECRET.encode()).decode()} ok")}], None, id="base64_of_bare"),
    pytest.param("reasoning_with_encrypted_content", [
        {"type": "reasoning", "id": "rs_1", "encrypted_content": "gAAAAB" + "x" * 40,
         "summary": [{"type": "summary_text", "text": f"The user gave password {SECRET}; I will use it."}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]}],
        "openai_responses", id="reasoning_with_encrypted_content"),
    pytest.param("anthropic_signed_thinking", [{"role": "assistant", "content": [
        {"type": "thinking", "thinking": f"the password is {SECRET}", "signature": "sig" + "A" * 30},
        {"type": "text", "text": "ok"}]}], "anthropic", id="anthropic_signed_thinking"),
    pytest.param("document_file_name", [{"role": "user", "content": [
        {"type": "text", "text": "see doc"},
        {"type": "file", "file": {"filename": f"creds-{SECRET}.txt", "file_data": "data:text/plain;base64,aGk="}}]}],
        None, id="document_file_name"),
    pytest.param("participant_name", [{"role": "user", "name": f"u{SECRET}", "content": "hi"}], None,
                 id="participant_name"),
]


@pytest.mark.parametrize(("name", "messages", "fmt"), LEAKS)
def test_a_remembered_secret_in_another_form_never_reaches_the_archive(name: str, messages: list[dict[str, Any]],
                                                                       fmt: str | None) -> None:
    assert archived_forms(name, messages, fmt) == []


def archived_texts(name: str, secret: str, later: str) -> str:
    """Every text of the transcripts after ``password: <secret>`` was taught and ``later`` mentioned it again."""
    cm = ContextManager(model="gpt-4o", store="memory", archive="memory", session_id=f"rt6-escapes-{name}")
    cm.add([{"role": "user", "content": f"The db password: {secret} (staging)."},
            {"role": "assistant", "content": "ok"}])
    cm.add([{"role": "user", "content": later}, {"role": "assistant", "content": "fine"}])
    cm.add([{"role": "user", "content": "next " + "filler " * 40}])
    cm.compact(force=True)
    cm.close()
    assert cm.archive is not None
    return "\n".join(m.text for _, ms in cm.archive.transcripts(cm.session_id) for m in ms)


NON_ASCII = "pässwörd-Secret9Z"
HTML_SECRET = "Tr0ub4dor&3-horse<x>"


def test_a_remembered_secret_json_escaped_to_ascii_never_reaches_the_archive() -> None:
    texts = archived_texts("json-ascii", NON_ASCII, "config: " + json.dumps({"db": NON_ASCII}))
    assert "rd-Secret9Z" not in texts


def test_a_remembered_secret_html_escaped_never_reaches_the_archive() -> None:
    texts = archived_texts("html", HTML_SECRET, "<pre>Tr0ub4dor&amp;3-horse&lt;x&gt;</pre>")
    assert "Tr0ub4dor" not in texts


def test_a_password_holding_a_less_than_sign_is_redacted_whole() -> None:
    texts = archived_texts("lt", HTML_SECRET, "nothing more")
    assert "<x>" not in texts


NAMED = "Hq7-Vb3-Np9-Xc5"


@pytest.mark.parametrize("text", [
    pytest.param(f'{{"name": "DB_PASSWORD", "value": "{NAMED}"}}', id="json_name_value"),
    pytest.param(f'env:\n  - name: DB_PASSWORD\n    value: "{NAMED}"\n', id="k8s_yaml_env"),
    pytest.param(f"env:\n- name: API_TOKEN\n  value: {NAMED}\n", id="k8s_yaml_env_bare"),
    pytest.param(f'[{{"Name":"SECRET_KEY","Value":"{NAMED}"}}]', id="ecs_json_env"),
    pytest.param(f'aws ssm put-parameter --name /prod/db/password --value "{NAMED}"', id="ssm_put_parameter"),
    pytest.param(f'{{"ParameterKey":"DbPassword","ParameterValue":"{NAMED}"}}', id="cloudformation_parameter"),
])
def test_a_secret_in_a_name_value_pair_is_redacted(text: str) -> None:
    from contextfold.redact import Redactor

    assert NAMED not in Redactor().redact_text(text)


def test_a_secret_named_in_an_assignment_is_redacted() -> None:
    from contextfold.redact import Redactor

    assert NAMED not in Redactor().redact_text(f"DB_PASSWORD={NAMED}")
