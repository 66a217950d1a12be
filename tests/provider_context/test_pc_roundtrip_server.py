"""Provider items through the client wrappers and the scripted server: signed, sent back byte for byte, dropped
where another provider would get them (real SDKs over loopback HTTP; the server verifies every signature)."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from _pc_session import OPENAI_MODEL, run_session, server

from contextfold import Policy
from contextfold.integrations.openai_client import wrap_openai
from contextfold.redact import Redactor
from contextfold.telemetry import ProviderItemDropped
from contextfold.testing import RecordedRequest, Reply, ScriptedToolCall

SECRET = "AKIAIOSFODNN7EXAMPLE"


def _secret_thinker(request: RecordedRequest) -> Reply:
    n = request.number
    return Reply(text=f"Step {n}.", reasoning=f"Step {n}: deploy with {SECRET} once the tests pass.",
                 tool_calls=(ScriptedToolCall("bash", {"cmd": f"make step-{n}"}, id=f"call_{n}"),))


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _issued(request: RecordedRequest) -> list[str]:
    """The thinking blocks and reasoning items the server answered ``request`` with."""
    if request.api == "messages":
        return [_canonical(b) for b in request.response.get("content", []) if b.get("type") == "thinking"]
    return [_canonical(i) for i in request.response.get("output", []) if i.get("type") == "reasoning"]


def _sent(request: RecordedRequest) -> list[str]:
    if request.api == "messages":
        return [_canonical(b) for m in request.body["messages"] if isinstance(m["content"], list)
                for b in m["content"]]
    return [_canonical(i) for i in request.body["input"]]


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_signed_reasoning_comes_back_byte_for_byte_though_redaction_reaches_the_model(provider: str) -> None:
    with server(handler=_secret_thinker) as llm:
        session = run_session(llm, provider, turns=4, lines=20, redact=Redactor(apply_to_model=True))
    assert not llm.invalid_requests, llm.invalid_requests[0].invalid
    requests = llm.requests
    last = set(_sent(requests[-1]))
    for request in requests[:-1]:
        issued = _issued(request)
        assert issued, request.number
        assert set(issued) <= last, request.number  # every block the server signed, as it signed it
    assert SECRET in _canonical(requests[-1].body)  # (the signed text is sent as the provider wrote it)
    assert session.cm.compactions == 0


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_provider_compaction_item_comes_back_first_and_byte_for_byte(provider: str) -> None:
    policy = Policy(compactor="provider", keep_tool_io_pairs=40)
    with server() as llm:
        session = run_session(llm, provider, turns=24, policy=policy, lines=250)
    assert not llm.invalid_requests, llm.invalid_requests[0].invalid
    records = llm.context_management.compactions
    assert records, "the session should cross the provider's compaction threshold"
    record = records[0]
    following = llm.requests[record.request]  # the request after the one answered with the compaction
    first = following.body["messages"][0]["content"][0] if provider == "anthropic" else next(
        i for i in following.body["input"] if i.get("role") not in ("system", "developer"))
    assert _canonical(first) == _canonical(record.item)
    assert llm.context_management.resent(llm.requests) == []
    assert session.cm.compactions == 0  # the provider compacted; contextfold did not


def test_another_providers_reasoning_is_dropped_with_an_event_when_the_session_moves() -> None:
    with server() as llm:
        session = run_session(llm, "anthropic", turns=3, lines=20)
        cm = session.cm
        client = wrap_openai(openai.OpenAI(base_url=llm.base_url, api_key="test", max_retries=0))
        client.responses(cm, model=OPENAI_MODEL, store=False)
    assert not llm.invalid_requests, llm.invalid_requests[0].invalid
    moved = llm.requests[-1]
    assert moved.api == "responses"
    assert "signature" not in _canonical(moved.body["input"])
    assert "Checking step 1." in _canonical(moved.body["input"])  # the turns themselves are all there
    dropped = [e for e in session.telemetry.events if isinstance(e, ProviderItemDropped)]
    assert [(e.format, dict(e.kinds), e.origins) for e in dropped] == [
        ("openai_responses", {"thinking": 3}, ("anthropic",))]
