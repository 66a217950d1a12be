"""Issue 21 §1 acceptance: every credential form of the corpus, planted only in context, leaves through no egress.

Each of the corpus's forms (``tests/redact_corpus.py``) is planted once in context — in user text, assistant text,
tool-call arguments, a small tool output or a large one (cut at write time, one form on the cut of a long line) —
and each of its values is repeated bare a turn or two later somewhere else, where no rule can recognise it: only the
session's memory can. Nothing is remembered beforehand. Two real sessions run it, one per summarizer (the
extractive one, and the LLM summarizer against the scripted OpenAI-compatible server, which answers with everything
it was sent), in a 16K window: write-time cuts, masking with digests and compaction all happen. Then every byte of
every egress is read: the archive (transcripts, summary-NNN.json, events.jsonl), the JSONL exporter's file, what the
real Ariadne server streams back, an OTLP/HTTP receiver on loopback, a live OTel provider's spans, the console
exporter, the LLM summarizer's requests, ``contextfold archive restore`` and ``status``, and ``contextfold replay
--json --html`` (the metrics and the HTML report). No value, and no fragment of one (10 letters and digits in a
row, 16 for hex), may be in any of them; the innocent snippets of the corpus must be in the archive byte for byte.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from redact_corpus import CODE, SECRETS, Secret

from contextfold.archive import Archive
from contextfold.cli import main
from contextfold.formats import get_format
from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.stores.archive_fs import FilesystemArchiveStore
from contextfold.telemetry import trace_id_for_session
from contextfold.testing import ScriptedLLMServer
from contextfold.testing.server import RecordedRequest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "telemetry"))  # the real Ariadne server's helpers
from _ariadne_server import AriadneServer, SseReader, start_ariadne

pytest.importorskip("opentelemetry.sdk", reason="needs the otel extra")
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from contextfold.exporters.otel import OtelTelemetry

pytestmark = pytest.mark.ariadne

WINDOW = 16_000
TURNS = 48
POSITIONS = ("user", "assistant", "tool_args", "small_output", "large_output")
# A fragment this long of a secret's letters and digits is a partial leak (hex and digits need more to be told
# from the ids and hashes every trace is full of).
FRAGMENT_CHARS = 10
HEX_FRAGMENT_CHARS = 16
_HEX_OR_DIGITS = re.compile(r"[0-9a-fA-F]+")
_MARKER = re.compile(r"\[REDACTED:[^\]\n]*\]")
# Large outputs: over the write-time caps, so their views are cut, and masked later with a digest.
LARGE_LINES = 100
LONG_LINE_CUT = 2_000  # where a long line is cut (CacheConfig's default max_line_length)


# ---- the session ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Planted:
    secret: Secret
    position: str
    turn: int
    repeat_position: str
    repeat_turn: int


def _plan() -> list[Planted]:
    plan = []
    for i, secret in enumerate(SECRETS):
        turn = i % (TURNS - 3)
        plan.append(Planted(secret, POSITIONS[i % len(POSITIONS)], turn, POSITIONS[(i + 2) % len(POSITIONS)],
                            turn + 1 + i % 2))
    return plan


def _whole_values(secret: Secret) -> list[str]:
    """The values a session would repeat (not one that is a piece of another: a tail the corpus checks apart)."""
    return [v for v in secret.values if not any(v != o and v in o for o in secret.values)]


def _innocent() -> list[str]:
    return [c.text for c in CODE]


def build_session(plan: list[Planted] | None = None) -> list[Message]:
    """The session: TURNS model calls, each form planted in its place and its values repeated bare later.

    ``plan``: where each form goes (default: every position in turn; ``bench/bench_secrets.py`` plants them all in
    one position to count what leaks from there).
    """
    plan = _plan() if plan is None else plan
    at: dict[tuple[str, int], list[str]] = {}
    long_line: dict[int, str] = {}
    for p in plan:
        if p.position == "large_output" and "\n" not in p.secret.text and p.turn not in long_line:
            long_line[p.turn] = p.secret.text  # this one sits on the cut of a long line
        else:
            at.setdefault((p.position, p.turn), []).append(p.secret.text)
        for value in _whole_values(p.secret) if p.repeat_position else ():
            at.setdefault((p.repeat_position, p.repeat_turn), []).append(f"as noted before: {value} (bare)")
    innocent = _innocent()
    messages = [Message("system", "You are a careful operations agent. Run tools, then answer.")]
    for t in range(TURNS):
        messages.append(Message("user", "\n".join([f"Step {t}: keep the deployment going.",
                                                   *innocent[t::TURNS], *at.get(("user", t), [])])))
        reasoning = "\n".join([f"Turn {t}: checking service {t} before the next change.",
                               *at.get(("assistant", t), [])])
        args = {"command": f"kubectl describe deployment svc-{t}", "notes": at.get(("tool_args", t), [])}
        call = ToolCall(f"call_{t}", "bash", json.dumps(args))
        messages.append(Message("assistant", reasoning, tool_calls=(call,)))
        messages.append(Message("tool", _output(t, at, long_line, innocent), tool_call_id=f"call_{t}", name="bash"))
    messages.append(Message("assistant", "All services are running."))
    return messages


def _output(t: int, at: dict[tuple[str, int], list[str]], long_line: dict[int, str], innocent: list[str]) -> str:
    small = at.get(("small_output", t), [])
    large = at.get(("large_output", t), [])
    if not large and t not in long_line:
        return "\n".join([f"deployment svc-{t}: 3/3 ready", *innocent[t::TURNS][:2], *small])
    lines = [f"svc-{t}/pod-{i}: ready=true restarts={i % 3} image=registry.local/svc:{i}" for i in range(LARGE_LINES)]
    for k, text in enumerate(large):  # spread over the output: head, middle (omitted) and tail
        lines.insert((k * 7919) % len(lines), text)
    if t in long_line:  # the form straddles the long line's cut
        text = long_line[t]
        lines.insert(3, "x" * (LONG_LINE_CUT - len(text) // 2) + " " + text + " " + "y" * 800)
    return "\n".join([*small, *lines])


# ---- egress receivers ---------------------------------------------------------------------------------------------


class Receiver:
    """An OTLP/HTTP endpoint on 127.0.0.1 that keeps every POST body."""

    def __init__(self) -> None:
        bodies: list[bytes] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                bodies.append(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet."""

        self.bodies = bodies
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def ariadne() -> Iterator[AriadneServer]:
    server = start_ariadne()
    yield server
    server.stop()


def _echo(request: RecordedRequest) -> str:
    """The worst summarizer: it answers with everything it was sent (a summary and a retained fact)."""
    text = " ".join(str(m.get("content")) for m in request.body.get("messages", []))
    return f"<summary>{text[-6000:]}</summary><retain>{text[-300:]}</retain>"


def run(kind: str, root: Path, ariadne: AriadneServer,
        session: list[Message] | None = None) -> tuple[dict[str, bytes], tuple[int, int, int]]:
    """Run the session with ``kind``'s summarizer and every exporter: every egress's bytes, by name, and how many
    outputs were cut at write time, maskings and compactions there were."""
    from contextfold.providers import get_provider
    from contextfold.summarize.llm import LLMSummarizer

    session_id = f"e2e-{kind}"
    store = f"local://{root / 'store'}"
    stream = SseReader(ariadne.port, trace_id=trace_id_for_session(session_id)).start()
    otlp = Receiver()
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    console = io.StringIO()
    with ScriptedLLMServer(handler=_echo) as llm, contextlib.redirect_stderr(console):
        summarizer: Any = "extractive"
        if kind == "llm":
            summarizer = LLMSummarizer(get_provider("openai:gpt-4o-mini", base_url=llm.base_url, api_key="test",
                                                    max_retries=0))
        cm = ContextManager("gpt-4o", max_context_tokens=WINDOW, store=store, archive=str(root / "archive"),
                            session_id=session_id, summarizer=summarizer,
                            telemetry=[f"jsonl:{root / 'events.jsonl'}", f"ariadne:{ariadne.url}",
                                       f"otel:{otlp.url}", "console", OtelTelemetry(tracer_provider=provider)])
        truncated = 0
        try:
            for m in session if session is not None else build_session():
                if m.role == "assistant":
                    cm.prepare()
                cm.add(m)
                truncated += cm.messages()[-1].kind == "truncated"
            cm.finish()
            figures = (truncated, cm.maskings, cm.compactions)
        finally:
            cm.close()
        llm_requests = json.dumps([r.body for r in llm.requests]).encode()
    provider.shutdown()
    otlp.close()
    events = (root / "events.jsonl").read_text().count("\n")
    received = stream.wait_for(lambda got: len(got) >= events - 1)
    stream.stop()
    assert kind != "llm" or llm_requests != b"[]"
    out = {f"archive/{p.relative_to(root / 'archive')}": p.read_bytes()
           for p in (root / "archive").rglob("*") if p.is_file()}
    out["jsonl exporter"] = (root / "events.jsonl").read_bytes()
    out["ariadne (stored and streamed back)"] = json.dumps(received).encode()
    out["otlp receiver"] = b"\n".join(otlp.bodies)
    out["live otel spans"] = "\n".join(s.to_json() for s in spans.get_finished_spans()).encode()
    out["console exporter"] = console.getvalue().encode()
    out["llm summarizer requests"] = llm_requests
    out.update(_cli(root, session_id, store))
    return out, figures


def _cli(root: Path, session_id: str, store: str) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    restored = root / "restored.jsonl"
    assert main(["archive", "restore", session_id, "--archive", str(root / "archive"), "--store", store,
                 "-o", str(restored)]) == 0
    out["cli archive restore"] = restored.read_bytes()
    status = io.StringIO()
    with contextlib.redirect_stdout(status):
        assert main(["status", "--archive", str(root / "archive"), "--json"]) == 0
    out["cli status"] = status.getvalue().encode()
    # The store's outputs through `cache grep` (every line of every output) and `cache read` (the largest whole).
    from contextfold.cache import ToolOutputCache
    from contextfold.stores import open_blob_store

    blobs = open_blob_store(store)
    try:
        cache = ToolOutputCache(blobs)
        largest = max(cache.ref_ids(), key=lambda ref: len(cache.get(ref)))
    finally:
        blobs.close()
    for name, argv in (("cli cache grep", ["cache", "grep", ".", "--max-matches", "1000000"]),
                       ("cli cache read", ["cache", "read", largest, "--limit", "1000000"])):
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            assert main([*argv, "--store", store]) == 0
        out[name] = printed.getvalue().encode()
    return out


def _replay(root: Path, session: list[Message] | None = None) -> dict[str, bytes]:
    """``contextfold replay --json --html`` of the session as a recorded JSONL file: the metrics and the report."""
    recorded = root / "recorded.jsonl"
    items = get_format("openai_chat").encode(session if session is not None else build_session())
    recorded.write_text("".join(json.dumps(item) + "\n" for item in items))
    metrics = io.StringIO()
    with contextlib.redirect_stdout(metrics), contextlib.redirect_stderr(io.StringIO()):
        assert main(["replay", str(recorded), "--window", str(WINDOW), "--json", "--html", str(root / "report.html"),
                     "--jobs", "1"]) == 0
    result = json.loads(metrics.getvalue())
    assert session is not None or result["per_session"][0]["summaries"], "the replay compacted nothing"
    return {"cli replay --json": metrics.getvalue().encode(), "html report": (root / "report.html").read_bytes()}


# ---- the leak check -------------------------------------------------------------------------------------------


def _fragments(secret: Secret, innocent: set[str]) -> set[str]:
    """Every run of letters and digits a secret's values hold that is long enough to name it (see FRAGMENT_CHARS)."""
    out: set[str] = set()
    for value in secret.values:
        for run in re.findall(r"[A-Za-z0-9]+", value):
            size = HEX_FRAGMENT_CHARS if _HEX_OR_DIGITS.fullmatch(run) else FRAGMENT_CHARS
            for i in range(len(run) - size + 1):
                piece = run[i : i + size]
                if len(set(piece)) > 3 and piece not in innocent:
                    out.add(piece)
    return out


_RUN = re.compile(rf"[A-Za-z0-9]{{{FRAGMENT_CHARS},}}")


def _windows(text: str) -> Iterator[str]:
    """Every piece of FRAGMENT_CHARS or HEX_FRAGMENT_CHARS letters and digits in ``text``."""
    for run in _RUN.findall(text):
        for size in (FRAGMENT_CHARS, HEX_FRAGMENT_CHARS):
            for i in range(len(run) - size + 1):
                yield run[i : i + size]


def leaks(outputs: dict[str, bytes], session: list[Message] | None = None) -> list[tuple[str, str, str]]:
    """(egress, form, what leaked) for every value or fragment of a planted secret found in an egress."""
    session_text = json.dumps([m.text for m in (session if session is not None else build_session())])
    innocent = session_text
    for secret in SECRETS:
        for value in sorted(secret.values, key=len, reverse=True):
            innocent = innocent.replace(json.dumps(value)[1:-1], "\x00")
    wanted = [(s, {v for v in s.values} | {json.dumps(v)[1:-1] for v in s.values}) for s in SECRETS]
    # Fragments are looked up by the windows of every long run of letters and digits an egress holds: one pass.
    innocent_pieces = set(_windows(innocent))
    fragments = {f: s for s in SECRETS for f in _fragments(s, innocent_pieces)}
    found = []
    for where, data in outputs.items():
        text = _MARKER.sub("\x00", data.decode("utf-8", "replace"))
        hits: dict[str, str] = {}
        for secret, values in wanted:
            hit = next((v for v in values if v in text), None)
            if hit is not None:
                hits[secret.label] = hit
        for piece in _windows(text):
            secret = fragments.get(piece)
            if secret is not None:
                hits.setdefault(secret.label, piece)
        found.extend((where, label, hit[:40]) for label, hit in hits.items())
    return found


@pytest.mark.parametrize("summarizer", ["extractive", "llm"])
def test_no_planted_secret_leaves_through_any_egress(summarizer: str, tmp_path: Path,
                                                      ariadne: AriadneServer) -> None:
    outputs, figures = run(summarizer, tmp_path, ariadne)
    assert figures[0] >= 3 and figures[1] >= 1 and figures[2] >= 2, figures  # cuts, maskings, compactions
    if summarizer == "extractive":
        outputs.update(_replay(tmp_path))
    assert len(outputs) >= 10
    found = leaks(outputs)
    assert found == [], "\n".join(map(str, found))

    # The leak check can fail: the model saw the secrets, and the store holds them whole.
    stored = b"".join(p.read_bytes() for p in (tmp_path / "store").rglob("*") if p.is_file())
    assert leaks({"tool output store": stored})

    # Innocent code and logs came through byte for byte: in the archived transcripts, every snippet is whole.
    archive = Archive(FilesystemArchiveStore(tmp_path / "archive"))
    archived = "\n".join(m.text for _, transcript in archive.transcripts(f"e2e-{summarizer}") for m in transcript)
    assert [c.label for c in CODE if c.text not in archived] == []
