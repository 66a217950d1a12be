"""Cost of ``ContextManager.prepare()`` per call when no compaction is needed, against LangChain's summarization.

For sessions of 100, 1,000 and 10,000 messages (user / assistant-with-tool-call / tool result, a few hundred
characters each, seeded), the window is made so big that nothing is ever compacted or masked. Each measured step
appends one message and times one call:

- ``prepare(format="openai_chat")``: the list sent to the API;
- ``prepare_messages()``: the Message objects adapters use;
- LangChain v1 ``SummarizationMiddleware.before_model`` on the same history (as LangChain messages), with a fake
  chat model that is never called because the trigger is never reached.

Prints median and p99 per call in milliseconds, and LangChain's median over ours. The target of issue 5 is
<= 0.2 ms median, flat in history length. Nothing here asserts on time.

Run: /work/venv/bin/python bench/bench_prepare.py [--sizes 100 1000 10000] [--repeats 1000] [--profile 10000]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import pstats
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from contextfold.compaction import Action, Policy
from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall

# Far above any history measured here, so that the policy always answers "nothing to do" (the case measured).
BIG_WINDOW = 10_000_000
# Same reason for the two other triggers: the message cap (emergency compaction) and the tool-output budget (masking).
NO_MESSAGE_CAP = 10_000_000
NO_TOOL_BUDGET = 100_000_000
# "A few hundred characters": the median non-huge message in the shared sessions is in this range.
TEXT_CHARS = (150, 450)
_WORDS = ("the", "test", "fails", "in", "parser", "because", "tokenize", "returns", "None", "when", "input", "is",
          "empty", "we", "should", "check", "def", "return", "self", "import", "line", "error", "file", "src")


def text(rng: random.Random) -> str:
    n = rng.randint(*TEXT_CHARS)
    words: list[str] = []
    size = 0
    while size < n:
        word = rng.choice(_WORDS)
        words.append(word)
        size += len(word) + 1
    return " ".join(words)


def message(i: int, rng: random.Random) -> Message:
    """The i-th message of a session: user, assistant calling a tool, the tool's result, and again."""
    kind = i % 3
    if kind == 0:
        return Message("user", text(rng))
    if kind == 1:
        args = json.dumps({"cmd": f"grep -n {rng.choice(_WORDS)} src/{rng.choice(_WORDS)}.py"})
        return Message("assistant", text(rng), (ToolCall(f"call_{i}", "bash", args),))
    return Message("tool", text(rng), tool_call_id=f"call_{i - 1}", name="bash")


def manager() -> ContextManager:
    policy = Policy(emergency_message_count=NO_MESSAGE_CAP, tool_output_budget_tokens=NO_TOOL_BUDGET)
    return ContextManager(model="gpt-4o", max_context_tokens=BIG_WINDOW, policy=policy, store="memory",
                          archive="memory", session_id="bench")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


Timing = tuple[float, float]  # (wall ms, this thread's CPU ms) of one call


def timed(call: Callable[[], Any]) -> tuple[Any, Timing]:
    """``call()``, with its wall time and this thread's CPU time (the CPU figure ignores preemption by other load)."""
    c0, t0 = time.thread_time(), time.perf_counter()
    result = call()
    t1, c1 = time.perf_counter(), time.thread_time()
    return result, ((t1 - t0) * 1000, (c1 - c0) * 1000)


def measure(step: Callable[[int], Timing], start: int, repeats: int) -> list[Timing]:
    """Timings of ``step(i)`` for i = start .. start + repeats - 1 (each step appends, then times one call)."""
    gc.collect()
    return [step(i) for i in range(start, start + repeats)]


def contextfold_steps(size: int, repeats: int, seed: int) -> dict[str, list[Timing]]:
    results: dict[str, list[Timing]] = {}
    apis: list[tuple[str, Callable[[ContextManager], Any]]] = [
        ("prepare(openai_chat)", lambda cm: cm.prepare(format="openai_chat")),
        ("prepare_messages()", lambda cm: cm.prepare_messages()),
    ]
    for label, call in apis:
        rng = random.Random(seed)
        cm = manager()
        cm.add([message(i, rng) for i in range(size)])
        call(cm)  # the first call settles and counts the history once; the steady state is what we measure

        def step(i: int, cm: ContextManager = cm, call: Callable[[ContextManager], Any] = call,
                 rng: random.Random = rng) -> Timing:
            cm.add(message(i, rng))
            _, elapsed = timed(lambda: call(cm))
            if cm.last_plan is None or cm.last_plan.action is not Action.NONE:
                raise SystemExit(f"the bench's premise broke: the policy planned {cm.last_plan}")
            return elapsed

        results[label] = measure(step, size, repeats)
        cm.close()
    return results


def to_langchain(m: Message) -> Any:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    if m.role == "user":
        return HumanMessage(m.text)
    if m.role == "assistant":
        calls = [{"name": c.name, "args": json.loads(c.arguments), "id": c.id, "type": "tool_call"}
                 for c in m.tool_calls]
        return AIMessage(m.text, tool_calls=calls)
    return ToolMessage(m.text, tool_call_id=m.tool_call_id or "")


def langchain_steps(size: int, repeats: int, seed: int) -> list[Timing] | str:
    try:
        from langchain.agents.middleware import SummarizationMiddleware
        from langchain_core.language_models.fake_chat_models import FakeListChatModel
    except ImportError as exc:
        return f"langchain not installed ({exc})"
    never_called = FakeListChatModel(responses=["(a summary that is never asked for)"])
    middleware = SummarizationMiddleware(never_called, trigger=("tokens", BIG_WINDOW))
    rng = random.Random(seed)
    state: dict[str, Any] = {"messages": [to_langchain(message(i, rng)) for i in range(size)]}
    middleware.before_model(state, None)  # type: ignore[arg-type]  # assigns ids once, like the first real turn

    def step(i: int) -> Timing:
        state["messages"].append(to_langchain(message(i, rng)))
        update, elapsed = timed(lambda: middleware.before_model(state, None))  # type: ignore[arg-type]
        if update is not None:
            raise SystemExit("the bench's premise broke: LangChain summarized")
        return elapsed

    return measure(step, size, repeats)


def profile(size: int, repeats: int, seed: int) -> None:
    rng = random.Random(seed)
    cm = manager()
    cm.add([message(i, rng) for i in range(size)])
    cm.prepare()
    profiler = cProfile.Profile()
    for i in range(size, size + repeats):
        cm.add(message(i, rng))
        profiler.enable()
        cm.prepare(format="openai_chat")
        profiler.disable()
    print(f"\ncProfile of {repeats} prepare(openai_chat) calls on {size} messages (own time first):")
    pstats.Stats(profiler).sort_stats("tottime").print_stats(15)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1_000, 10_000])
    parser.add_argument("--repeats", type=int, default=1_000, help="measured calls per size and API")
    parser.add_argument("--lc-repeats", type=int, default=300, help="measured LangChain calls per size")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", type=int, default=None, metavar="SIZE",
                        help="also print a cProfile of prepare() on a session of SIZE messages")
    args = parser.parse_args()

    header = (f"{'messages':>9} | {'API':<34} | {'median ms':>9} | {'p99 ms':>8} | {'cpu med':>8} | "
              f"{'cpu p99':>8} | {'calls':>5} | LangChain / this (median)")
    print(header)
    print("-" * len(header))
    for size in args.sizes:
        rows: dict[str, list[Timing] | str] = dict(contextfold_steps(size, args.repeats, args.seed))
        rows["LangChain SummarizationMiddleware"] = langchain_steps(size, args.lc_repeats, args.seed)
        theirs = rows["LangChain SummarizationMiddleware"]
        lc_median = statistics.median(w for w, _ in theirs) if isinstance(theirs, list) else None
        for label, timings in rows.items():
            if isinstance(timings, str):
                print(f"{size:>9} | {label:<34} | {timings}")
                continue
            wall, cpu = [w for w, _ in timings], [c for _, c in timings]
            median = statistics.median(wall)
            ratio = f"{lc_median / median:.1f}x" if lc_median is not None and label.startswith("prepare") else ""
            print(f"{size:>9} | {label:<34} | {median:>9.4f} | {percentile(wall, 0.99):>8.4f} | "
                  f"{statistics.median(cpu):>8.4f} | {percentile(cpu, 0.99):>8.4f} | {len(timings):>5} | {ratio}")
    if args.profile:
        profile(args.profile, args.repeats, args.seed)


if __name__ == "__main__":
    main()
