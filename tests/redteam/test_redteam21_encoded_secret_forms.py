"""A remembered secret as PHP, Go and Python's own encoders write it is redacted like its other encoded forms.

Found by the twenty-first red team. A value taught once in context (``password: X``) is remembered in the forms a
tool writes it in (JSON with and without ``\\u`` escapes, URL-encoded, HTML-escaped, base64), so a later bare repeat
is redacted where no rule sees it. Three everyday encoders write other forms, and each went through in clear on
8c274dd, to the archived transcript and to the LLM summarizer's prompt (on the scripted server over loopback):

- PHP's ``json_encode`` (default flags) escapes ``/`` as ``\\/`` (Laravel, WordPress, Composer's output);
- Go's ``encoding/json`` (``json.Marshal``, kubectl/gh/terraform's ``-o json``) escapes ``&``, ``<``, ``>`` as
  ``\\u0026``, ``\\u003c``, ``\\u003e``;
- Python's ``urllib.parse.quote`` (default ``safe="/"``), as a URL path is built, keeps ``/``; .NET's
  ``HttpUtility.UrlEncode`` writes lowercase hex (``%2b``).
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterator

import pytest

from contextfold import ContextManager
from contextfold.archive import Archive, MemoryArchiveStore
from contextfold.messages import Message, ToolCall
from contextfold.providers import get_provider
from contextfold.redact.memory import forms
from contextfold.stores.memory import MemoryBlobStore
from contextfold.summarize.llm import LLMSummarizer
from contextfold.testing.server import ScriptedLLMServer
from contextfold.tokens import EstimatingCounter

SECRET = "Rt21/Kw8+Pq3&Zx7<Nv5"
COUNTER = EstimatingCounter()
SUMMARY = "<summary>## Goal\nDeploy rt21-nonce-5d1e</summary>\n<retain>\n- rt21-nonce-5d1e\n</retain>"


def _php(value: str) -> str:
    return json.dumps(value)[1:-1].replace("/", "\\/")


def _go(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)[1:-1].replace("&", "\\u0026").replace("<", "\\u003c").replace(
        ">", "\\u003e")


def _python_path(value: str) -> str:
    return urllib.parse.quote(value)


def _dotnet(value: str) -> str:
    return urllib.parse.quote_plus(value, safe="").replace("%2B", "%2b").replace("%2F", "%2f").replace(
        "%3C", "%3c")


ENCODERS = {"php_json": _php, "go_json": _go, "python_quote": _python_path, "dotnet_urlencode": _dotnet}


@pytest.mark.parametrize("encoder", sorted(ENCODERS))
def test_each_encoders_form_is_remembered(encoder: str) -> None:
    written = ENCODERS[encoder](SECRET)
    assert written != SECRET
    assert written in forms(SECRET)


@pytest.fixture
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(counter=COUNTER) as s:
        yield s


def test_encoded_repeats_reach_neither_the_summarizer_nor_the_archive(server: ScriptedLLMServer) -> None:
    server.push(SUMMARY)
    provider = get_provider("openai:gpt-4o-mini", base_url=server.base_url, api_key="test", max_retries=0)
    store = MemoryArchiveStore()
    cm = ContextManager(model="gpt-4o", max_context_tokens=4_000, store=MemoryBlobStore(),
                        summarizer=LLMSummarizer(provider, counter=COUNTER), archive=Archive(store),
                        session_id="rt21-encoded-forms")
    cm.add([Message.system("You deploy services."), Message.user(f"The deploy user's password: {SECRET}")])
    for number, encoder in enumerate(sorted(ENCODERS)):
        call = ToolCall(f"call_{number}", "bash", json.dumps({"cmd": f"cat config-{number}.json"}))
        cm.add([Message.assistant(f"Reading config {number}.", [call]),
                Message.tool(f"call_{number}", f'{{"db": {{"user": "deploy", "dsn": "{ENCODERS[encoder](SECRET)}"}}}}',
                             name="bash")])
    for turn in range(6):  # later turns, so that the configs are old enough to be summarized
        cm.add([Message.user(f"Check service {turn} of rt21-nonce-5d1e."), Message.assistant(f"Service {turn} is up.")])
    cm.add([Message.user("Go on with rt21-nonce-5d1e.")])
    cm.compact()
    prompts = json.dumps([request.body for request in server.requests])
    archived = b"".join(bytes(data) for data in store._files.values()).decode("utf-8")
    assert server.requests, "the LLM summarizer was not called"
    for encoder in sorted(ENCODERS):
        written = ENCODERS[encoder](SECRET)
        assert json.dumps(written)[1:-1] not in prompts, encoder
        assert written not in archived and json.dumps(written)[1:-1] not in archived, encoder
