"""Where the background read-ahead's CPU goes in the lm32b agent loop, and what its placeholders built ahead become.

Issue 22's bar: the read-ahead costs at most 150 ms of CPU per million tokens added (``bench/bench_agent_loop.py``
measures the whole; this splits it). The loop is ``bench_agent_loop.py``'s (each session's messages added turn by
turn, ``prepare()``, then the background thread given the model call's time), without its collections before each
turn. Thread CPU timers wrap the read-ahead's parts (inclusive: the placeholders hold their digests' secret checks
and counts; the digest material holds its entity extraction); each timer costs ~2-4 us a call, so the parts called
most (the digest items' checks) read a little high. The placeholders' own counts are the tokenizer's count of each
placeholder built (one call each: its ref and digest are new text), timed only where ``placeholder_ahead`` asks.

Then the placeholders built ahead (each with its masked message, ``cache/masking._masked_ahead``) are followed to
the end of their session: taken by an applied masking, still in the view unmasked when the session ends, or gone
(a compaction summarized them), and the outputs each applied masking took with no placeholder built ahead (built
on the agent's thread, in that masking turn) are counted. Those left in the view are why a quarter to a third of
what is built is never masked (issue 22, fifteenth session: see DESIGN.md).

With ``--simulate``, each turn's view (its tokens, steering's masking order) and what the read-ahead built and the
maskings took are recorded, and a read-ahead that builds only what the next masking takes is played over them: after
each turn it builds, in the masking's order, the released outputs whose savings cover what a masking would free now
(down to 80% of soft) plus a margin for the next turn's growth. Printed for each margin: the placeholders it builds,
and those a masking takes unbuilt (built in the masking turn instead, on the agent's thread).

Run: PYTHONPATH=src python bench/bench_read_ahead_parts.py [--sessions 69] [--window 16000] [--digest-tokens N]
     [--simulate] (``--digest-tokens 0``: masked outputs without digests, the read-ahead without any digest work)
     [--digest light] (``policy.mask_digest``: the light digest, cache/_light_digest.py)
"""

from __future__ import annotations

import argparse
import functools
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "trajectories" / "sweagent-lm32b"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=69, help="the first N lm32b sessions by id")
    parser.add_argument("--window", type=int, default=16_000)
    parser.add_argument("--digest-tokens", type=int, default=None, help="policy.mask_digest_tokens (default: its own)")
    parser.add_argument("--digest", choices=("full", "light"), default=None,
                        help="policy.mask_digest (default: its own)")
    parser.add_argument("--data", type=Path, default=DATA, help="the recorded lm32b sessions")
    parser.add_argument("--simulate", action="store_true", help="play a read-ahead that builds only what is needed")
    args = parser.parse_args()

    from contextfold import _background
    from contextfold.cache import ToolOutputCache, _digest, masking
    from contextfold.importers import load_sessions
    from contextfold.manager import ContextManager, _digests_ahead, _masking, _secrets
    from contextfold.redact import _redactor
    from contextfold.steering import _state
    from contextfold.steering.resources import superseded_reads
    from contextfold.summarize import entities
    from contextfold.tokens.counting import TiktokenCounter

    spent: Counter[str] = Counter()
    calls: Counter[str] = Counter()
    agent = threading.current_thread()
    labels: list[str] = []  # (printed in this order: each part under the one that holds it)

    def timed(owner: Any, name: str, label: str) -> None:
        inner: Callable[..., Any] = getattr(owner, name)

        @functools.wraps(inner)
        def part(*a: Any, **k: Any) -> Any:
            if threading.current_thread() is agent:  # (a masking turn building what was not built ahead)
                return inner(*a, **k)
            started = time.thread_time()
            try:
                return inner(*a, **k)
            finally:
                spent[label] += time.thread_time() - started
                calls[label] += 1

        setattr(owner, name, part)
        labels.append(label)

    def timed_from(caller: Callable[..., Any], owner: Any, name: str, label: str) -> None:
        """``timed``, counting only the calls ``caller`` makes itself (a counter's count of the placeholder)."""
        inner: Callable[..., Any] = getattr(owner, name)
        code = caller.__code__

        @functools.wraps(inner)
        def part(*a: Any, **k: Any) -> Any:
            if sys._getframe(1).f_code is not code or threading.current_thread() is agent:
                return inner(*a, **k)
            started = time.thread_time()
            try:
                return inner(*a, **k)
            finally:
                spent[label] += time.thread_time() - started
                calls[label] += 1

        setattr(owner, name, part)
        labels.append(label)

    timed(_digests_ahead, "read_digests", "outputs' digests (material + placeholders)")
    timed(_digest, "_rank", "  digest material (ranking)")
    timed(entities, "_extract", "    entity extraction (words not remembered)")
    timed(_redactor.Redactor, "blank", "  outputs blanked (light: inside placeholders)")
    timed(_digests_ahead, "placeholder_ahead", "  placeholders (digest walk, checks, counts)")
    timed(ToolOutputCache, "stage", "    outputs staged (encoded, hashed, lines counted)")
    timed_from(masking.placeholder_ahead, TiktokenCounter, "count", "    the placeholders' own counts")
    if hasattr(masking, "light_digest"):  # (a tree before the light digest has none)
        timed(masking, "light_digest", "    light digests (entities, checks, count)")
        from contextfold.cache import _light_digest
        timed(_redactor.Redactor, "blank", "      blanking (Redactor.blank)")
        timed(_light_digest, "entity_kinds", "      light digests' entities")
        timed(_light_digest, "digest_items", "      light digests' walks (items counted)")
        timed(_redactor.Redactor, "mentions_secret", "      secret checks (Redactor.mentions_secret)")
    timed(_redactor.Redactor, "clean_words", "    digest items' secret checks (bulk)")
    timed(masking, "_masked_ahead", "    masked messages built")
    timed(_masking.Masking, "encode_ahead", "masked messages counted and encoded")
    timed(_redactor.Redactor, "redact_ahead", "redaction of what add() did not redact")
    timed(_secrets.SessionSecrets, "read_ahead", "whole outputs' secrets")
    timed(_state.Steering, "read_calls_ahead", "calls' access (superseded reads)")
    timed(_masking.Masking, "_fold_ahead", "superseded reads' fold")

    built: dict[int, Any] = {}  # id -> the output a placeholder and masked message were built ahead for
    taken: set[int] = set()
    fate: Counter[str] = Counter()
    build = masking._masked_ahead

    events: list[tuple[Any, ...]] = []  # (with --simulate) one session's turns, builds and maskings, in order
    session: list[Any] = [None]  # (the manager of the session running)

    def built_ahead(message: Any, *a: Any, **k: Any) -> None:
        built[id(message)] = message
        if args.simulate:
            events.append(("built", id(message), session[0].counter.count_message(message)))
        build(message, *a, **k)

    masking._masked_ahead = built_ahead
    apply = _masking.Masking._apply

    unbuilt: Counter[str] = Counter()  # outputs a masking took with no placeholder built ahead, and its turns

    def applied(self: Any, view: list[Any], result: Any) -> None:
        taken.update(id(view[i]) for i in result.masked_indices)
        cold = sum(1 for i in result.masked_indices if id(view[i]) not in built)
        unbuilt["outputs"] += cold
        unbuilt["turns"] += cold > 0
        unbuilt["maskings"] += 1
        unbuilt["most"] = max(unbuilt["most"], cold)
        if args.simulate:
            events.append(("masked", [id(view[i]) for i in result.masked_indices]))
        apply(self, view, result)

    _masking.Masking._apply = applied  # type: ignore[method-assign]

    ahead = {"cpu": 0.0}
    submit = _background.submit

    def submit_timed(job: Callable[..., Any], *job_args: Any) -> Any:
        def run(*a: Any) -> Any:
            started = time.thread_time()
            try:
                return job(*a)
            finally:
                ahead["cpu"] += time.thread_time() - started
        return submit(run, *job_args)

    _background.submit = submit_timed
    policy = {**({} if args.digest_tokens is None else {"mask_digest_tokens": args.digest_tokens}),
              **({} if args.digest is None else {"mask_digest": args.digest})} or None
    added_tokens = 0
    played: list[list[tuple[Any, ...]]] = []
    soft = 0
    for n, recorded in enumerate(sorted(load_sessions(args.data), key=lambda s: s.id)[: args.sessions]):
        cm = ContextManager("gpt-4o", max_context_tokens=args.window, store="memory", archive="memory",
                            session_id=f"parts-{n}", policy=policy)
        session[0] = cm
        soft = cm.budgets.soft
        cm.counter.wait_exact()
        added = 0
        messages = recorded.messages
        for index, answer in enumerate(messages):
            if answer.role != "assistant":
                continue
            pending = messages[added:index]
            if pending:
                added_tokens += sum(cm.counter.count_message(m) for m in pending)
                cm.add(pending)
                added = index
            cm.prepare()
            _background.wait_idle()  # the model call: the read-ahead runs now
            if args.simulate:  # (the view after the turn: what the next masking would take first, its tokens)
                view, pairs = cm._view.normalized(), cm._view.pairs()
                order = cm.steering.mask_order(view, pairs, superseded_reads(view, cm.steering.policies.resource_rule,
                                                                             pairs))
                events.append(("turn", [id(view[i]) for i in order.first if 0 <= i < len(view)],
                               [id(m) for m in view if m.role == "tool"], cm._view.totals()[0] + cm._tool_tokens))
            added_tokens += cm.counter.count_message(answer)
            cm.add(answer)
            added = index + 1
        in_view = {id(m) for m in cm._view.raw}
        for key in built:
            fate["masked" if key in taken else "in the view unmasked at the end" if key in in_view else "gone"] += 1
        built.clear()
        taken.clear()
        played.append(events[:])
        events.clear()
        cm.close()

    per_million = 1e9 / added_tokens
    print(f"{added_tokens:,} tokens added; read-ahead {ahead['cpu'] * per_million:.0f} ms CPU per 1M tokens")
    for label in labels:
        print(f"  {label:52s} {spent[label] * per_million:6.0f}   ({calls[label]:,} calls)")
    print(f"placeholders built ahead: {sum(fate.values()):,}; " + ", ".join(f"{k} {v:,}" for k, v in fate.items()))
    print(f"maskings applied: {unbuilt['maskings']:,}; outputs they took unbuilt {unbuilt['outputs']:,}, in "
          f"{unbuilt['turns']:,} of them (at most {unbuilt['most']} in one)")
    if args.simulate:
        for margin in (0, 500, 1_000, 1_500, 2_000, 3_000):
            print(f"  built only for the next masking, margin {margin:5,}: " + _simulate(played, soft, margin))


# A placeholder with a digest of the default 32 tokens takes about this many: masking an output saves the rest.
PLACEHOLDER_TOKENS = 45
# Masking before a summary lands the view at this share of soft (manager/_masking.MASK_HEADROOM).
LANDING_SHARE = 0.8


def _simulate(sessions: list[list[tuple[Any, ...]]], soft: int, margin: int) -> str:
    """Play a read-ahead that builds only the next masking's outputs over the recorded turns (see the docstring)."""
    builds = cold = cold_turns = most = 0
    for events in sessions:
        released: dict[int, int] = {}  # output -> the tokens masking it saves, as the read-ahead released it
        built: set[int] = set()
        masked: set[int] = set()
        for event in events:
            if event[0] == "built":
                released[event[1]] = max(0, event[2] - PLACEHOLDER_TOKENS)
            elif event[0] == "turn":
                first, outputs, total = event[1], event[2], event[3]
                need = total + margin - LANDING_SHARE * soft
                covered = 0
                for key in dict.fromkeys([*first, *outputs]):
                    if key not in released or key in masked:
                        continue
                    if covered >= need:
                        break
                    if key not in built:
                        built.add(key)
                        builds += 1
                    covered += released[key]
            else:
                unbuilt = sum(1 for key in event[1] if key in released and key not in built)
                masked.update(event[1])
                cold += unbuilt
                cold_turns += unbuilt > 0
                most = max(most, unbuilt)
    return (f"{builds:,} built ahead; {cold:,} taken unbuilt, in {cold_turns:,} masking turns "
            f"(at most {most} in one)")


if __name__ == "__main__":
    main()
