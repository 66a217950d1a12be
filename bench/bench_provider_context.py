"""Who compacts: contextfold, the provider, or both, side by side on recorded sessions (issue 23).

Recorded SWE-agent sessions are replayed through the client wrappers (``wrap_anthropic`` and
``wrap_openai(...).responses``) against the scripted server, which plays each provider's own context management
(``contextfold.testing.context_management``: Anthropic's tool-use clearing and server-side compaction, OpenAI's
compaction items) and refuses what the provider refuses, requests over the window included. Each chain joins
several sessions into one long conversation (an agent working through tasks one after another): single sessions
stay under Anthropic's 50,000-token compaction floor. The recorded assistant turns are the model's replies, the
recorded tool outputs are added as the agent would.

For each provider and each ``Policy.compactor`` it prints: requests; tokens sent (what contextfold sent, as the
server counts them) and tokens the model read (after the provider's own edits and compaction); contextfold's
compactions and maskings; the provider's compactions, cleared tool uses and cleared tokens (from its replies, as
``cm.provider_context`` read them); refused requests (over the window, or invalid).

Run: PYTHONPATH=src python bench/bench_provider_context.py [--chains 4] [--per-chain 4] [--window 64000]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import anthropic
import openai

from contextfold import ContextManager, Policy
from contextfold.importers import RecordedSession, load_sessions
from contextfold.integrations.anthropic_client import wrap_anthropic
from contextfold.integrations.openai_client import wrap_openai
from contextfold.messages import Message
from contextfold.testing import Reply, ScriptedLLMServer, ScriptedToolCall
from contextfold.testing.wire import request_tokens

SESSIONS = Path(__file__).resolve().parents[2] / "shared" / "data" / "trajectories" / "sweagent-lm32b"
MODES = ("contextfold", "provider", "both")
PROVIDERS = ("anthropic", "openai")
MODEL = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-4o"}
# What the replayed model may answer with (the recorded turns are far shorter).
MAX_TOKENS = 2_000


@dataclass
class Figures:
    """One (provider, mode) over every chain."""

    requests: int = 0
    sent: int = 0
    read: int = 0
    compactions: int = 0
    maskings: int = 0
    provider_compactions: int = 0
    cleared_tool_uses: int = 0
    cleared_tokens: int = 0
    refused: int = 0
    invalid: int = 0
    seconds: float = 0.0
    resent: int = 0
    largest: int = 0
    notes: list[str] = field(default_factory=list)


def chains(sessions: Sequence[RecordedSession], count: int, per_chain: int) -> Iterator[list[Message]]:
    """``count`` conversations of ``per_chain`` sessions each: one system prompt, then every session's turns."""
    ordered = sorted(sessions, key=lambda s: s.id)
    for c in range(count):
        members = ordered[c * per_chain:(c + 1) * per_chain]
        if len(members) < per_chain:
            return
        out: list[Message] = []
        for k, session in enumerate(members):
            for m in session.messages:
                if m.role == "system" and out:
                    continue
                out.append(_renamed(m, f"c{c}s{k}"))
        yield out


def _renamed(m: Message, prefix: str) -> Message:
    """``m`` with its call ids made unique in the chain (sessions reuse ``call_1``...).

    The new ids hold no ``call_``: the scripted server, like Anthropic, answers with ``toolu_`` ids and rewrites
    that prefix, and results sent under the recorded id would then answer no call (dropped as orphans).
    """
    calls = tuple(replace(call, id=_unique(prefix, call.id)) for call in m.tool_calls)
    tool_call_id = _unique(prefix, m.tool_call_id) if m.tool_call_id else None
    return replace(m, tool_calls=calls, tool_call_id=tool_call_id)


def _unique(prefix: str, call_id: str) -> str:
    return f"{prefix}_" + call_id.replace("call_", "k")


def _reply(m: Message) -> Reply:
    calls = tuple(ScriptedToolCall(c.name, c.arguments or "{}", id=c.id) for c in m.tool_calls)
    return Reply(text=m.text, tool_calls=calls)


def _results(provider: str, messages: Sequence[Message]) -> Any:
    if provider == "anthropic":
        return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": m.tool_call_id,
                                             "content": m.text} for m in messages]}
    return [{"type": "function_call_output", "call_id": m.tool_call_id, "output": m.text} for m in messages]


def replay(provider: str, mode: str, chain: Sequence[Message], window: int, figures: Figures) -> None:
    """One chain through one wrapper in one mode; adds its figures."""
    fmt = "anthropic" if provider == "anthropic" else "openai_responses"
    with ScriptedLLMServer(context_window=window, validator="formats") as server:
        cm = ContextManager(model=MODEL[provider], max_context_tokens=window, store="memory", archive="memory",
                            policy=Policy(compactor=mode))  # type: ignore[arg-type]
        if provider == "anthropic":
            llm: Any = anthropic.Anthropic(base_url=server.url, api_key="bench", max_retries=0)
            call = lambda: wrap_anthropic(llm).messages(cm, model=MODEL[provider], max_tokens=MAX_TOKENS)  # noqa: E731
        else:
            llm = openai.OpenAI(base_url=server.base_url, api_key="bench", max_retries=0)
            call = lambda: wrap_openai(llm).responses(cm, model=MODEL[provider], store=False)  # noqa: E731
        started = time.perf_counter()
        pending: list[Message] = []
        for m in chain:
            if m.role == "tool":
                pending.append(m)
                continue
            if pending:
                cm.add(_results(provider, pending), format=fmt)
                pending = []
            if m.role == "assistant":
                server.push(_reply(m))
                try:
                    call()
                except (anthropic.APIError, openai.APIError) as exc:
                    figures.notes.append(f"{type(exc).__name__}: {str(exc)[:120]}")
                    return
            else:
                cm.add({"role": m.role, "content": m.text})
        figures.seconds += time.perf_counter() - started
        api = "messages" if provider == "anthropic" else "responses"
        figures.requests += len(server.requests)
        figures.sent += sum(request_tokens(api, r.body, server.counter) for r in server.requests)
        figures.read += sum(r.input_tokens for r in server.requests if r.status == 200)
        figures.largest = max([figures.largest, *(r.input_tokens for r in server.requests)])
        figures.compactions += cm.compactions
        figures.maskings += cm.maskings
        figures.provider_compactions += len(server.context_management.compactions)
        totals = cm.provider_context.totals
        figures.cleared_tool_uses += totals.cleared_tool_uses
        figures.cleared_tokens += totals.cleared_input_tokens
        figures.refused += sum(1 for r in server.requests if r.status != 200)
        figures.invalid += len(server.invalid_requests)
        figures.resent += len(server.context_management.resent(server.requests))
        cm.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--per-chain", type=int, default=4)
    parser.add_argument("--window", type=int, default=64_000)
    parser.add_argument("--providers", default=",".join(PROVIDERS), help="comma-separated: anthropic,openai")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated: contextfold,provider,both")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = parser.parse_args()
    sessions = load_sessions(str(SESSIONS))
    conversations = list(chains(sessions, args.chains, args.per_chain))
    print(f"{len(conversations)} chains of {args.per_chain} SWE-agent sessions "
          f"({sum(len(c) for c in conversations):,} messages), window {args.window:,}")
    results: dict[str, dict[str, Figures]] = {}
    for provider in args.providers.split(","):
        for mode in args.modes.split(","):
            figures = Figures()
            for chain in conversations:
                replay(provider, mode, chain, args.window, figures)
            results.setdefault(provider, {})[mode] = figures
    header = ("| provider | compactor | requests | tokens sent | tokens the model read | contextfold compactions / "
              "maskings | provider compactions | provider cleared tool uses / tokens | largest request | refused | "
              "resent | s |")
    print(header)
    print("|---" * (header.count("|") - 1) + "|")
    for provider, modes in results.items():
        for mode, f in modes.items():
            print(f"| {provider} | {mode} | {f.requests} | {f.sent:,} | {f.read:,} | {f.compactions} / {f.maskings} | "
                  f"{f.provider_compactions} | {f.cleared_tool_uses} / {f.cleared_tokens:,} | {f.largest:,} | "
                  f"{f.refused} | {f.resent} | {f.seconds:.1f} |")
            for note in f.notes:
                print(f"  note ({provider}, {mode}): {note}")
    if args.json:
        print(json.dumps({p: {m: vars(f) for m, f in modes.items()} for p, modes in results.items()}, indent=1))


if __name__ == "__main__":
    main()
