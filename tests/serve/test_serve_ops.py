"""Operations of the proxy: health, readiness, metrics, the token, JSON logs without keys, timeouts, shutdown."""

from __future__ import annotations

import io
import json
import logging
import socket
import threading

import httpx
import pytest
from _serve_support import MODEL, opening_fixture, proxy_config, proxy_fixture, upstream_fixture  # noqa: F401 (fixtures)

from contextfold.cli import main
from contextfold.errors import ConfigError
from contextfold.redact import Redactor
from contextfold.serve import ProxyServer, ServeConfig
from contextfold.serve.ops import JsonFormatter
from contextfold.testing import ScriptedLLMServer

TOKEN = "proxy-token-0123456789"


def chat(url: str, text: str, **headers: str) -> httpx.Response:
    return httpx.post(url + "/v1/chat/completions", timeout=10, headers={"authorization": "Bearer sk-ops", **headers},
                      json={"model": MODEL, "messages": [{"role": "user", "content": text}]})


def test_health_readiness_and_metrics(upstream: ScriptedLLMServer, proxy: ProxyServer, opening: str) -> None:
    assert httpx.get(proxy.url + "/healthz").json() == {"status": "ok"}
    assert httpx.get(proxy.url + "/readyz").json() == {"status": "ready"}
    upstream.push("hi")
    assert chat(proxy.url, opening).status_code == 200
    text = httpx.get(proxy.url + "/metrics").text
    for name in ("contextfold_serve_requests_total", "contextfold_serve_tokens_sent_total",
                 "contextfold_serve_tokens_saved_total", "contextfold_serve_compactions_total",
                 "contextfold_serve_upstream_seconds_bucket", "contextfold_serve_prepare_seconds_bucket"):
        assert name in text
    assert 'contextfold_serve_requests_total{api="chat",status="200"}' in text


def test_a_token_guards_everything_but_health(upstream: ScriptedLLMServer, opening: str) -> None:
    with ProxyServer(proxy_config(upstream, token=TOKEN)) as guarded:
        refused = chat(guarded.url, opening)
        assert refused.status_code == 401 and "x-contextfold-token" in refused.json()["error"]["message"]
        assert chat(guarded.url, opening, **{"x-contextfold-token": "wrong-token-0123456789"}).status_code == 401
        upstream.push("in")
        assert chat(guarded.url, opening, **{"x-contextfold-token": TOKEN}).status_code == 200
        assert httpx.get(guarded.url + "/metrics").status_code == 401
        assert httpx.get(guarded.url + "/metrics", headers={"authorization": f"Bearer {TOKEN}"}).status_code == 200
        assert httpx.get(guarded.url + "/healthz").status_code == 200


@pytest.mark.parametrize("field", ["upstream_timeout_s", "connect_timeout_s", "shutdown_grace_s", "session_max_age_s"])
@pytest.mark.parametrize("value", [float("inf"), float("nan")])
def test_a_timeout_that_never_ends_is_refused_naming_its_field(field: str, value: float) -> None:
    # (8c274dd took inf: over Redis the lease store's math.ceil(inf + 600) crashed the start, uvicorn's int(inf) too)
    with pytest.raises(ConfigError) as refused:
        ServeConfig(**{field: value})
    assert refused.value.field == field and "finite" in str(refused.value)


def test_binding_beyond_loopback_needs_a_token(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ConfigError, match="token"):
        ServeConfig(host="0.0.0.0")
    assert ServeConfig(host="0.0.0.0", token=TOKEN).host == "0.0.0.0"
    assert main(["serve", "--host", "0.0.0.0", "--port", "0"]) != 0
    err = capsys.readouterr().err
    assert "token" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert main(["serve", "--window", "gpt-x=lots"]) != 0
    assert "--window" in capsys.readouterr().err


def test_log_lines_are_json_and_never_hold_the_key(upstream: ScriptedLLMServer, proxy: ProxyServer,
                                                   opening: str) -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter(Redactor()))
    logger = logging.getLogger("contextfold.serve")
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.INFO)
    key = "sk-proj-" + "Ab3dE6gH9jK2mN5pQ8sT1vW4yZ7" * 2
    try:
        upstream.push("fine")
        assert chat(proxy.url, opening, authorization=f"Bearer {key}").status_code == 200
        httpx.post(proxy.url + "/v1/chat/completions", content=b"{", headers={"authorization": f"Bearer {key}"})
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert {line["msg"] for line in lines} >= {"served", "refused"}
    served = next(line for line in lines if line["msg"] == "served")
    assert served["session"].startswith("px") and served["status"] == 200 and "ms" in served
    assert key not in stream.getvalue() and key[:20] not in stream.getvalue()


def test_an_upstream_that_never_answers_times_out_as_a_502(upstream: ScriptedLLMServer, opening: str) -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts connections (the backlog) and never answers
    try:
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/v1"
        with ProxyServer(proxy_config(upstream, openai_base_url=url, upstream_timeout_s=0.5)) as proxy:
            answer = chat(proxy.url, opening)
        assert answer.status_code == 502 and "ReadTimeout" in answer.json()["error"]["message"]
    finally:
        silent.close()


def test_a_stream_in_flight_finishes_when_the_proxy_is_stopped(upstream: ScriptedLLMServer, opening: str) -> None:
    proxy = ProxyServer(proxy_config(upstream)).start()
    upstream.push("the last words of a graceful shutdown")
    upstream.stream_pause = threading.Event()
    stopper = threading.Thread(target=proxy.stop)
    try:
        with httpx.stream("POST", proxy.url + "/v1/chat/completions", timeout=10,
                          headers={"authorization": "Bearer sk-ops"},
                          json={"model": MODEL, "stream": True, "messages": [{"role": "user", "content": opening}]}
                          ) as answer:
            lines = answer.iter_lines()
            assert next(line for line in lines if line.startswith("data:"))
            stopper.start()  # SIGTERM's path: stop accepting, let the stream in flight finish
            upstream.stream_pause.set()
            rest = [line for line in lines if line.startswith("data:")]
    finally:
        upstream.stream_pause.set()
        upstream.stream_pause = None
        stopper.join()
    assert rest[-1] == "data: [DONE]"
    chunks = [json.loads(line[5:]) for line in rest[:-1]]
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks) == (
        "the last words of a graceful shutdown")
