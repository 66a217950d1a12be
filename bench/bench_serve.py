"""contextfold serve under load: two proxy processes over one redis-server and one S3 (moto_server) on loopback.

S concurrent sessions x T turns of an agent (a tool call answered with a few hundred lines each turn, in a small
window, so sessions compact), each turn sent to the instance after the one the session used last (a round-robin
balancer, no sticky sessions). When 40% of the turns are answered, instance 0 is SIGKILLed (requests in flight
with it fail) and started again; a failed request is retried on the other instance, as a balancer would. The
upstream is the scripted server, validating every request against its API (``formats`` validators) and refusing
any over the window.

At the end, every session's history is restored from the archive and the stored view (both shared) and compared
with what its client sent: lost and duplicated messages. Then the latency the proxy adds to a request with nothing
to compact: the same short requests sent straight to the upstream and through one proxy, interleaved, p50 and p99
of each and of the difference.

Run: python bench/bench_serve.py [--sessions 200] [--turns 20] [--window 8000] [--latency-requests 400]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from contextfold.formats import openai_chat
from contextfold.serve import ServeConfig
from contextfold.serve.identity import caller_scope, opening_fingerprint, session_id
from contextfold.serve.sessions import Backend, restore
from contextfold.testing import Reply, ScriptedLLMServer, ScriptedToolCall
from contextfold.testing.services import MotoServer, RedisServer, free_port, s3_environment

MODEL = "gpt-4o-mini"
SALT = "bench-serve-salt"
# A failed request (instance killed, connection refused) goes to the other instance up to this many times.
MAX_TRIES = 6
# Seconds a client waits for an answer before it retries on the other instance.
CLIENT_TIMEOUT_S = 120.0
# Seconds a restarted instance may take to answer /healthz.
START_TIMEOUT_S = 60.0


class Instance:
    """One ``contextfold serve`` process."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.port = free_port()
        self.args, self.env = args, env
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-m", "contextfold", "serve", "--port", str(self.port),
                                         "--log-level", "error", *self.args], env=self.env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/readyz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)  # a bench may poll; tests never do
        raise RuntimeError(f"contextfold serve on port {self.port} did not get ready")

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=60)


def tool_output(session: int, turn: int) -> str:
    return "\n".join(f"s{session}t{turn} {i:03d} src/pkg_{i % 11}/mod_{i}.py:{i * 3} checked ({i % 9} warnings)"
                     for i in range(120))


def scripted_upstream(window: int) -> ScriptedLLMServer:
    ids = itertools.count()

    def answer(request: Any) -> Reply:
        return Reply.calling(ScriptedToolCall("bash", {"cmd": "make check"}, id=f"call_{next(ids)}"), text="Next.")

    return ScriptedLLMServer(handler=answer, context_window=window, validator="formats")


async def run_sessions(instances: list[Instance], sessions: int, turns: int, kill_at: int,
                       restart: Any) -> tuple[dict[int, list[dict[str, Any]]], dict[str, Any]]:
    histories: dict[int, list[dict[str, Any]]] = {}
    answered = 0
    retries = failures = 0
    reasons: dict[str, int] = {}
    killed = asyncio.Event()
    limits = httpx.Limits(max_connections=sessions * 2, max_keepalive_connections=sessions * 2)
    # A client gives up on a request after CLIENT_TIMEOUT_S and retries it on the other instance, as a balancer
    # would; the request it gave up on may still reach the upstream (and its session) meanwhile.
    async with httpx.AsyncClient(timeout=CLIENT_TIMEOUT_S, limits=limits) as client:

        async def one(session: int) -> None:
            nonlocal answered, retries, failures
            history: list[dict[str, Any]] = [{"role": "system", "content": "You are a build agent."},
                                             {"role": "user", "content": f"Session {session}: make the build pass."}]
            histories[session] = history
            target = session % 2
            for turn in range(turns):
                for _attempt in range(MAX_TRIES):
                    url = instances[target].url + "/v1/chat/completions"
                    target = 1 - target
                    try:
                        response = await client.post(url, json={"model": MODEL, "messages": history},
                                                     headers={"authorization": f"Bearer sk-bench-{session % 10}"})
                    except httpx.HTTPError as exc:
                        retries += 1
                        reasons[type(exc).__name__] = reasons.get(type(exc).__name__, 0) + 1
                        continue
                    if response.status_code >= 500:
                        retries += 1
                        reasons[str(response.status_code)] = reasons.get(str(response.status_code), 0) + 1
                        continue
                    break
                else:
                    failures += 1
                    return
                if response.status_code != 200:
                    failures += 1
                    return
                message = response.json()["choices"][0]["message"]
                message = {k: v for k, v in message.items() if v is not None and k in ("role", "content",
                                                                                      "tool_calls")}
                history += [message, {"role": "tool", "tool_call_id": message["tool_calls"][0]["id"],
                                      "content": tool_output(session, turn)}]
                answered += 1
                if answered % max(1, sessions * turns // 10) == 0:
                    print(f"  ... {answered} turns answered", file=sys.stderr, flush=True)
                if answered == kill_at and not killed.is_set():
                    killed.set()
                    await asyncio.to_thread(restart)

        started = time.perf_counter()
        await asyncio.gather(*(one(s) for s in range(sessions)))
        elapsed = time.perf_counter() - started
    return histories, {"answered": answered, "retries": retries, "reasons": reasons, "failed_sessions": failures,
                       "seconds": elapsed}


async def latency(upstream_url: str, proxy_url: str, requests: int) -> dict[str, float]:
    direct: list[float] = []
    proxied: list[float] = []
    async with httpx.AsyncClient(timeout=60) as client:
        for i in range(requests):
            body = {"model": MODEL, "messages": [{"role": "user", "content": f"latency probe {i}: say hi"}]}
            for url, into in ((upstream_url, direct), (proxy_url, proxied)) if i % 2 else (
                    (proxy_url, proxied), (upstream_url, direct)):
                t0 = time.perf_counter()
                response = await client.post(url + "/chat/completions", json=body,
                                             headers={"authorization": "Bearer sk-latency"})
                into.append((time.perf_counter() - t0) * 1000)
                assert response.status_code == 200, response.text
    return {"direct_p50": pct(direct, 50), "direct_p99": pct(direct, 99), "proxy_p50": pct(proxied, 50),
            "proxy_p99": pct(proxied, 99), "added_p50": pct(proxied, 50) - pct(direct, 50),
            "added_p99": pct(proxied, 99) - pct(direct, 99)}


def cpu_seconds(instance: Instance) -> float:
    """User + system CPU time of the instance's process so far (robust to a machine busy with other work)."""
    assert instance.process is not None
    fields = Path(f"/proc/{instance.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], p: int) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def shape(m: Any) -> tuple[Any, ...]:
    return m.role, m.text, m.tool_call_id, tuple((c.id, c.name, c.arguments) for c in m.tool_calls)


def verify(config: ServeConfig, histories: dict[int, list[dict[str, Any]]]) -> dict[str, int]:
    backend = Backend(config)
    lost = duplicated = other = 0
    for session, history in histories.items():
        scope = caller_scope(f"sk-bench-{session % 10}", SALT)
        restored = restore(backend, session_id(scope, "opening", opening_fingerprint(history)))
        # The last reply and tool output stay with the client: it never sent them (the run ended).
        want = [shape(m) for m in openai_chat.decode(history[:-2])]
        got = [shape(m) for m in restored]
        for item in set(want):
            have = got.count(item)
            lost += max(0, want.count(item) - have)
            duplicated += max(0, have - want.count(item))
        other += int(got != want and not lost and not duplicated)
    backend.close()
    return {"lost": lost, "duplicated": duplicated, "order_or_other": other,
            "messages": sum(len(h) for h in histories.values())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--window", type=int, default=8_000)
    parser.add_argument("--latency-requests", type=int, default=400)
    args = parser.parse_args()
    os.environ.update(s3_environment())
    work = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    (work / "redis").mkdir()
    with RedisServer(work / "redis") as redis, MotoServer("archive") as moto, \
            scripted_upstream(args.window) as upstream:
        archive = f"s3://archive/serve?endpoint_url={moto.url}&path_style=true"
        common = ["--openai-base-url", upstream.base_url, "--sessions", redis.url, "--store", redis.url,
                  "--archive", archive, "--window", f"{MODEL}={args.window}", "--key-salt", SALT]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        instances = [Instance(common, env), Instance(common, env)]
        for instance in instances:
            instance.start()
        kill_at = args.sessions * args.turns * 2 // 5
        kills = {"at": kill_at, "restart_s": 0.0}

        def restart() -> None:
            t0 = time.perf_counter()
            instances[0].kill()
            instances[0].start()
            kills["restart_s"] = time.perf_counter() - t0

        try:
            histories, load = asyncio.run(run_sessions(instances, args.sessions, args.turns, kill_at, restart))
            requests = list(upstream.requests)
            statuses: dict[int, int] = {}
            for r in requests:
                statuses[r.status] = statuses.get(r.status, 0) + 1
            invalid = sum(1 for r in requests if r.invalid is not None)
            over = sum(1 for r in requests if r.input_tokens > args.window)
            config = ServeConfig(sessions=redis.url, store=redis.url, archive=archive, key_salt=SALT)
            checked = verify(config, histories)
            cpu_before = cpu_seconds(instances[1])
            timing = asyncio.run(latency(upstream.base_url, instances[1].url + "/v1", args.latency_requests))
            cpu_ms = (cpu_seconds(instances[1]) - cpu_before) * 1000 / args.latency_requests
        finally:
            for instance in instances:
                instance.stop()
    turns = load["answered"]
    print(f"bench_serve: {args.sessions} sessions x {args.turns} turns, window {args.window}, 2 instances, "
          f"instance 0 SIGKILLed after {kills['at']} turns and back in {kills['restart_s']:.2f} s")
    print(f"  turns answered {turns} in {load['seconds']:.1f} s ({turns / load['seconds']:.1f}/s); client retries "
          f"{load['retries']} {load['reasons']}; sessions that failed {load['failed_sessions']}")
    print(f"  upstream requests {len(requests)}: statuses {statuses}; invalid {invalid}; over the window {over}")
    print(f"  archive + stored view vs what the clients sent: {checked['messages']} messages, lost "
          f"{checked['lost']}, duplicated {checked['duplicated']}, other differences {checked['order_or_other']}")
    print(f"  added latency, nothing to compact ({args.latency_requests} requests each way, interleaved): "
          f"p50 {timing['added_p50']:.2f} ms, p99 {timing['added_p99']:.2f} ms "
          f"(direct p50 {timing['direct_p50']:.2f} / p99 {timing['direct_p99']:.2f} ms; through the proxy "
          f"p50 {timing['proxy_p50']:.2f} / p99 {timing['proxy_p99']:.2f} ms); proxy CPU per request "
          f"{cpu_ms:.2f} ms")


if __name__ == "__main__":
    main()
