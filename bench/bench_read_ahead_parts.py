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
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _timing import DATA, ThreadTimers, replay_loop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=69, help="the first N lm32b sessions by id")
    parser.add_argument("--window", type=int, default=16_000)
    parser.add_argument("--digest-tokens", type=int, default=None, help="policy.mask_digest_tokens (default: its own)")
    parser.add_argument("--digest", choices=("full", "light"), default=None,
                        help="policy.mask_digest (default: its own)")
    parser.add_argument("--data", type=Path, default=DATA, help="the recorded lm32b sessions")
    parser.add_argument("--simulate", action="store_true", help="play a read-ahead that builds only what is needed")
    parser.add_argument("--reach", type=int, default=None,
                        help="manager._read_ahead.MASKING_REACH_TOKENS (default: its own)")
    parser.add_argument("--together", type=int, default=None,
                        help="manager._read_ahead.BUILT_TOGETHER (default: its own)")
    parser.add_argument("--collect", action="store_true",
                        help="a full collection before each prepare(), as bench_agent_loop.py (caches as cold)")
    args = parser.parse_args()

    from contextfold import _background
    from contextfold.cache import ToolOutputCache, _digest, masking
    from contextfold.manager import _compactor, _digests_ahead, _masking, _secrets
    from contextfold.redact import _redactor
    from contextfold.steering import _state
    from contextfold.steering.resources import superseded_reads
    from contextfold.summarize import entities
    from contextfold.tokens.counting import TiktokenCounter

    if args.reach is not None:
        from contextfold.manager import _read_ahead

        if not hasattr(_read_ahead, "MASKING_REACH_TOKENS"):
            raise SystemExit("bench_read_ahead_parts: --reach: this tree has no MASKING_REACH_TOKENS")
        _read_ahead.MASKING_REACH_TOKENS = args.reach
    if args.together is not None:
        from contextfold.manager import _read_ahead

        if not hasattr(_read_ahead, "BUILT_TOGETHER"):
            raise SystemExit("bench_read_ahead_parts: --together: this tree has no BUILT_TOGETHER")
        _read_ahead.BUILT_TOGETHER = args.together
    timers = ThreadTimers()
    timed = timers.wrap
    digests_part = timed(_digests_ahead, "read_digests", "outputs' digests (material + placeholders)")
    # The read-ahead calls it through a LazyModule, which keeps the function it first read: one read before this
    # patch (an import order changed) would leave the part untimed. What it will call is read now, and must be it.
    if _compactor._digests_ahead.read_digests is not digests_part:
        raise SystemExit("bench_read_ahead_parts: the read-ahead calls another read_digests than the timed one "
                         "(manager._compactor._digests_ahead read it before the patch)")
    timed(_digest, "_rank", "  digest material (ranking)")
    timed(entities, "_extract", "    entity extraction (words not remembered)")
    timed(_redactor.Redactor, "blank", "  outputs blanked (light: inside placeholders)")
    timed(_digests_ahead, "placeholder_ahead", "  placeholders (digest walk, checks, counts)")
    timed(ToolOutputCache, "stage", "    outputs staged (encoded, hashed, lines counted)")
    timed(TiktokenCounter, "count", "    the placeholders' own counts", only_from=masking.placeholder_ahead)
    if hasattr(TiktokenCounter, "count_split"):  # (a tree before the eighteenth session has none)
        timed(TiktokenCounter, "count_split", "    the placeholders' counts from pieces (listing nothing)")
    if hasattr(masking, "light_digest"):  # (a tree before the light digest has none)
        from contextfold.cache import _light_digest
        timed(masking, "light_digest", "    light digests (entities, checks, count)")
        timed(_redactor.Redactor, "blank", "      blanking (Redactor.blank)")
        timed(_redactor.Redactor, "learn_text", "      long outputs' secrets learned (Redactor.learn_text)")
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
    added = {"tokens": 0}
    played: list[list[tuple[Any, ...]]] = []
    soft = [0]

    def started(cm: Any) -> None:
        session[0] = cm
        soft[0] = cm.budgets.soft

    def counted(cm: Any, message: Any) -> None:
        added["tokens"] += cm.counter.count_message(message)

    def turned(cm: Any) -> None:
        if args.simulate:  # (the view after the turn: what the next masking would take first, its tokens)
            view, pairs = cm._view.normalized(), cm._view.pairs()
            order = cm.steering.mask_order(view, pairs, superseded_reads(view, cm.steering.policies.resource_rule,
                                                                         pairs))
            events.append(("turn", [id(view[i]) for i in order.first if 0 <= i < len(view)],
                           [id(m) for m in view if m.role == "tool"], cm._view.totals()[0] + cm._tool_tokens))

    def ended(cm: Any) -> None:
        in_view = {id(m) for m in cm._view.raw}
        for key in built:
            fate["masked" if key in taken else "in the view unmasked at the end" if key in in_view else "gone"] += 1
        built.clear()
        taken.clear()
        played.append(events[:])
        events.clear()

    replay_loop(args.data, args.sessions, session_prefix="parts", policy=policy, window=args.window,
                on_session=started, on_added=counted, on_turn=turned, on_end=ended, collect=args.collect)
    added_tokens = added["tokens"]
    if not timers.calls[timers.labels[0]] and sum(fate.values()):
        raise SystemExit("bench_read_ahead_parts: placeholders were built ahead but read_digests was never timed")

    per_million = 1e9 / added_tokens
    print(f"{added_tokens:,} tokens added; read-ahead {ahead['cpu'] * per_million:.0f} ms CPU per 1M tokens")
    for label, ms, calls in timers.rows(per_million):
        print(f"  {label:56s} {ms:6.0f}   ({calls:,} calls)")
    print(f"placeholders built ahead: {sum(fate.values()):,}; " + ", ".join(f"{k} {v:,}" for k, v in fate.items()))
    print(f"maskings applied: {unbuilt['maskings']:,}; outputs they took unbuilt {unbuilt['outputs']:,}, in "
          f"{unbuilt['turns']:,} of them (at most {unbuilt['most']} in one)")
    if args.simulate:
        for margin in (0, 500, 1_000, 1_500, 2_000, 3_000):
            print(f"  built only for the next masking, margin {margin:5,}: " + _simulate(played, soft[0], margin))


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
