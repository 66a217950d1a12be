"""Cost of ``ContextManager.prepare()`` per call when nothing is compacted, against LangChain's summarization.

For sessions of 100, 1,000, 10,000 and 100,000 messages (user / assistant-with-tool-call / tool result, a few hundred
characters each, seeded), the window is made so big that nothing is ever compacted or masked. Each measured step
appends one message and times one call:

- ``prepare(format="openai_chat")``: the list sent to the API;
- ``prepare_messages()``: the Message objects adapters use;
- with ``--kept``, ``prepare(format="openai_chat")`` again while the caller still holds the list of the call before
  (``messages = cm.prepare()`` in a loop): that list may not change, so the call builds a new one (a caller that lets
  go of it before the next call gets the same list back, changed in place: see ``contextfold.manager._handed``);
- LangChain v1 ``SummarizationMiddleware.before_model`` on the same history (as LangChain messages), in the same
  process, with a fake chat model that is never called because the trigger is never reached.

Each (tree, size) runs in a fresh interpreter; with ``--base SRC`` another source tree (the commit before, e.g.
``git worktree add /tmp/perf-base <commit>`` and ``--base /tmp/perf-base/src``) is measured in the same run, the
trees alternating run by run so that both see the same load. Prints, per size and tree, the median and p99 of the
calls of all ``--runs`` runs pooled (wall, and this thread's CPU time, which leaves out waiting for a core), the
spread of the per-run p99s, LangChain's median in the same processes, and the base's figures over ours; then the CPU
the process's other threads spent per call (the telemetry thread building, redacting and writing the calls' events,
the background jobs; what they had queued at the end included; what the set-up queued done before), and with this
thread's median the process's; and apart, the other threads' CPU for the set-up (the bulk add and the first call).
Targets of issue 22: p99 <= 1 ms at every size, median flat within 2x from 100 to 100,000 messages, our p99 below
LangChain's median. Nothing here asserts on time.

Run: python bench/bench_prepare.py [--base /tmp/perf-base/src] [--runs 5] [--sizes 100 1000 10000 100000]
     [--calls 300] [--lc-calls 100] [--profile 10000]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import pstats
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _bytecode import compiled

if TYPE_CHECKING:
    from contextfold.manager import ContextManager
    from contextfold.messages import Message

HERE = Path(__file__).resolve().parent

# Far above any history measured here, so that the policy always answers "nothing to do" (the case measured).
BIG_WINDOW = 100_000_000
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
    from contextfold.messages import Message, ToolCall

    kind = i % 3
    if kind == 0:
        return Message("user", text(rng))
    if kind == 1:
        args = json.dumps({"cmd": f"grep -n {rng.choice(_WORDS)} src/{rng.choice(_WORDS)}.py"})
        return Message("assistant", text(rng), (ToolCall(f"call_{i}", "bash", args),))
    return Message("tool", text(rng), tool_call_id=f"call_{i - 1}", name="bash")


def manager() -> ContextManager:
    from contextfold.compaction import Policy
    from contextfold.manager import ContextManager

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


KEPT = "prepare(), last list kept"


# Rows of the other threads' CPU per call (one figure per run) are named with this prefix.
OTHER_THREADS = "other threads' CPU per call: "
# ... and of what they did for the set-up (the bulk add and the first call), in ms, apart from the calls'.
SETUP_THREADS = "other threads' CPU of the set-up: "


def contextfold_steps(size: int, repeats: int, seed: int, kept: bool = False) -> dict[str, list[Timing]]:
    from contextfold import _background
    from contextfold.compaction import Action

    results: dict[str, list[Timing]] = {}
    held: list[Any] = []  # the list of the call before, for KEPT

    def keep(result: Any) -> Any:
        held[:] = [result]
        return result

    apis: list[tuple[str, Callable[[ContextManager], Any]]] = [
        ("prepare(openai_chat)", lambda cm: cm.prepare(format="openai_chat")),
        ("prepare_messages()", lambda cm: cm.prepare_messages()),
    ]
    if kept:
        apis.append((KEPT, lambda cm: keep(cm.prepare(format="openai_chat"))))
    for label, call in apis:
        rng = random.Random(seed)
        process, own = time.process_time(), time.thread_time()
        cm = manager()
        cm.add([message(i, rng) for i in range(size)])
        call(cm)  # the first call settles and counts the history once; the steady state is what we measure
        cm.tokens()  # waits for the exact tokenizer: its loading thread must not run while we measure
        # What the set-up queued on the other threads is done before the calls are measured: its figures (a first
        # call's, counted exactly once the tokenizer is there) are not the calls' (0.8 s at 100,000 messages fell
        # into the calls' figure, 2.5 ms a call, on a9a74c5).
        getattr(cm.tracer.telemetry, "flush", lambda: None)()
        _background.wait_idle()
        setup = (time.process_time() - process) - (time.thread_time() - own)
        results[f"{SETUP_THREADS}{label}"] = [(setup * 1000, setup * 1000)]

        def step(i: int, cm: ContextManager = cm, call: Callable[[ContextManager], Any] = call,
                 rng: random.Random = rng) -> Timing:
            cm.add(message(i, rng))
            _, elapsed = timed(lambda: call(cm))
            if cm.last_plan is None or cm.last_plan.action is not Action.NONE:
                raise SystemExit(f"the bench's premise broke: the policy planned {cm.last_plan}")
            return elapsed

        process, own = time.process_time(), time.thread_time()
        results[label] = measure(step, size, repeats)
        # The CPU the process's other threads spent for these calls (the telemetry thread building, redacting and
        # writing their events; the background jobs), what they had queued included: per call, in ms.
        getattr(cm.tracer.telemetry, "flush", lambda: None)()
        _background.wait_idle()
        others = (time.process_time() - process) - (time.thread_time() - own)
        results[f"{OTHER_THREADS}{label}"] = [(others * 1000 / repeats, others * 1000 / repeats)]
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


def child(size: int, calls: int, lc_calls: int, seed: int, kept: bool = False) -> None:
    """Measure one size in this interpreter (the tree on PYTHONPATH) and print the timings as one JSON line."""
    import contextfold

    rows: dict[str, list[Timing] | str] = dict(contextfold_steps(size, calls, seed, kept))
    rows["LangChain SummarizationMiddleware"] = langchain_steps(size, min(calls, lc_calls), seed)
    print(json.dumps({"source": str(Path(contextfold.__file__).parent), "rows": rows}))


def run_child(src: str, size: int, calls: int, lc_calls: int, seed: int, kept: bool = False) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": compiled(src)}  # (bytecode as installed: bench/_bytecode.py)
    args = [sys.executable, __file__, "--child", str(size), "--calls", str(calls), "--lc-calls", str(lc_calls),
            "--seed", str(seed), *(["--kept"] if kept else [])]
    done = subprocess.run(args, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"{src} at {size} messages failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if Path(result["source"]).resolve() != (Path(src) / "contextfold").resolve():
        raise SystemExit(f"the child imported {result['source']}, not the tree under {src}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1_000, 10_000, 100_000])
    parser.add_argument("--runs", type=int, default=5, help="fresh interpreters per tree and size")
    parser.add_argument("--calls", type=int, default=300, help="measured calls per run, size and API")
    parser.add_argument("--lc-calls", type=int, default=100, help="measured LangChain calls per run and size")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--base", default=None, help="another src directory, measured in the same run")
    parser.add_argument("--kept", action="store_true",
                        help="also measure prepare() while the caller holds the list of the call before")
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--profile", type=int, default=None, metavar="SIZE",
                        help="only print a cProfile of prepare() on a session of SIZE messages (this tree)")
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.calls, args.lc_calls, args.seed, args.kept)
        return
    if args.profile:
        profile(args.profile, args.calls, args.seed)
        return
    trees = [("this tree", str(HERE.parent / "src"))] + ([("base", args.base)] if args.base else [])
    print(f"load average at start: {' '.join(f'{x:.1f}' for x in os.getloadavg())}; {args.runs} runs per tree "
          f"and size, {args.calls} calls per run (LangChain {args.lc_calls}), trees alternating")
    pooled: dict[tuple[int, str], dict[str, list[Timing]]] = {}
    run_p99: dict[tuple[int, str, str], list[float]] = {}
    others: dict[tuple[int, str, str], list[float]] = {}
    setups: dict[tuple[int, str, str], list[float]] = {}
    for run in range(args.runs):
        for size in args.sizes:
            for label, src in trees if run % 2 == 0 else trees[::-1]:
                # (LangChain at 100,000 messages takes ~0.3 s a call: fewer calls there)
                lc_calls = args.lc_calls if size < 100_000 else max(10, args.lc_calls // 5)
                result = run_child(src, size, args.calls, lc_calls, args.seed + run, args.kept)
                for api, timings in result["rows"].items():
                    if api.startswith(SETUP_THREADS):
                        setups.setdefault((size, label, api[len(SETUP_THREADS):]), []).append(timings[0][1])
                        continue
                    if api.startswith(OTHER_THREADS):
                        others.setdefault((size, label, api[len(OTHER_THREADS):]), []).append(timings[0][1])
                        continue
                    if isinstance(timings, str):
                        print(f"{size:>9} | {label} | {api}: {timings}")
                        continue
                    pairs = [(w, c) for w, c in timings]
                    pooled.setdefault((size, label), {}).setdefault(api, []).extend(pairs)
                    run_p99.setdefault((size, label, api), []).append(percentile([w for w, _ in pairs], 0.99))
    header = (f"{'messages':>9} | {'tree':<9} | {'API':<34} | {'median ms':>9} | {'p99 ms':>8} | {'cpu med':>8} | "
              f"{'cpu p99':>8} | {'p99 of runs (min-max)':>21} | {'calls':>5} | p99 vs LangChain's median (ms) | "
              "base / this")
    print(header)
    print("-" * len(header))
    for size in args.sizes:
        lc = pooled.get((size, "this tree"), {}).get("LangChain SummarizationMiddleware")
        lc_median = statistics.median(w for w, _ in lc) if lc else None
        lc_cpu_median = statistics.median(c for _, c in lc) if lc else None
        for label, _ in trees:
            for api, timings in pooled.get((size, label), {}).items():
                wall, cpu = [w for w, _ in timings], [c for _, c in timings]
                median, p99 = statistics.median(wall), percentile(wall, 0.99)
                runs = run_p99[(size, label, api)]
                versus = ""
                if lc_median is not None and lc_cpu_median is not None and api.startswith("prepare"):
                    cpu99 = percentile(cpu, 0.99)
                    versus = (f"wall {'<' if p99 < lc_median else '>='} {lc_median:.3f}, "
                              f"cpu {'<' if cpu99 < lc_cpu_median else '>='} {lc_cpu_median:.3f}")
                ratio = ""
                base = (pooled.get((size, "base"), {}).get(api)
                        if label == "this tree" and api.startswith("prepare") else None)
                if base:
                    base_wall = [w for w, _ in base]
                    ratio = (f"median {statistics.median(base_wall) / median:.1f}x, "
                             f"p99 {percentile(base_wall, 0.99) / p99:.1f}x")
                print(f"{size:>9} | {label:<9} | {api:<34} | {median:>9.4f} | {p99:>8.4f} | "
                      f"{statistics.median(cpu):>8.4f} | {percentile(cpu, 0.99):>8.4f} | "
                      f"{min(runs):>9.3f} - {max(runs):>9.3f} | {len(timings):>5} | {versus:<30} | {ratio}")
    print("CPU of the process's other threads (telemetry, background jobs) per call, ms: median of runs (min-max); "
          "with this thread's median, the process's CPU per call")
    for (size, label, api), figures in others.items():
        own = statistics.median(c for _, c in pooled[(size, label)][api])
        print(f"{size:>9} | {label:<9} | {api:<34} | {statistics.median(figures):.3f} ({min(figures):.3f}-"
              f"{max(figures):.3f}) | process {own + statistics.median(figures):.3f}")
    print("CPU of the other threads for the set-up (the bulk add and the first call, done before the calls), ms: "
          "median of runs (min-max)")
    for (size, label, api), figures in setups.items():
        print(f"{size:>9} | {label:<9} | {api:<34} | {statistics.median(figures):.1f} ({min(figures):.1f}-"
              f"{max(figures):.1f})")
    for label, _ in trees:
        for api in ("prepare(openai_chat)", KEPT):
            by_size = {size: pooled[(size, label)][api] for size in args.sizes
                       if api in pooled.get((size, label), {})}
            if len(by_size) > 1:
                low, high = min(by_size), max(by_size)
                wall = statistics.median(w for w, _ in by_size[high]) / statistics.median(w for w, _ in by_size[low])
                cpu = statistics.median(c for _, c in by_size[high]) / statistics.median(c for _, c in by_size[low])
                print(f"{label}: {api} median at {high:,} / at {low:,} messages: {wall:.2f}x wall, {cpu:.2f}x CPU")
    print(f"load average at end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
