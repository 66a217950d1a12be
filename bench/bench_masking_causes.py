"""What the agent's thread builds on a masking turn of the lm32b loop, and why: placeholders found, held or rebuilt.

Issue 22's bar is masking turns' CPU p99 <= 2 ms (``bench_agent_loop.py``). A masking turn swaps in the masked
messages the read-ahead built (``cache/masking._mask_one``); one it finds otherwise is built on the agent's thread.
This replays the loop as ``bench_agent_loop.py`` does and sorts each output a masking takes by what the turn did:

- ``swapped``: the masked message built ahead, at the secrets' state of now (a look-up);
- ``held``: built ahead before a secret was learned, checked against what was learned since and still the one
  (``_still_holds``: the stored output read, the learned values searched in it and in the words its digest asked);
- ``invalidated``: built ahead, a secret learned since touches it: built again here (why: the value occurs in the
  output, or in a word the digest asked; ``empty`` when the placeholder built ahead listed nothing);
- ``unbuilt``: nothing built ahead (the read-ahead had not got there): stored and built here;
- ``other``: built ahead for another message (a copy of an output's text) or without its masked message.

Thread CPU timers (~1-2 us each) around ``_mask_one``, ``_still_holds``, the digests built on the agent's thread, the
masking's secrets catch-up, the batch, its application and the answered output's widening. Per class: outputs, their
mean and total CPU, and what they add to the slowest 2% of masking turns against the middle half.

Run: PYTHONPATH=src python bench/bench_masking_causes.py [--digest light|full] [--sessions 69] [--window 16000]
     [--json FILE] (each masking turn's figures)
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import statistics
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "trajectories" / "sweagent-lm32b"
CLASSES = ("swapped", "held", "invalidated", "unbuilt", "other")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=69, help="the first N lm32b sessions by id")
    parser.add_argument("--window", type=int, default=16_000)
    parser.add_argument("--digest", choices=("full", "light"), default=None, help="policy.mask_digest")
    parser.add_argument("--data", type=Path, default=DATA, help="the recorded lm32b sessions")
    parser.add_argument("--json", type=Path, default=None, help="write each masking turn's figures there")
    args = parser.parse_args()

    from contextfold import _background
    from contextfold.cache import masking
    from contextfold.importers import load_sessions
    from contextfold.manager import ContextManager, _answered_view, _masking, _secrets

    agent = threading.current_thread()
    turn: dict[str, Any] = {}  # the masking turn's figures, reset before each prepare()
    why: Counter[str] = Counter()  # why the invalidated were invalidated

    def timed(owner: Any, name: str, label: str) -> None:
        inner: Callable[..., Any] = getattr(owner, name)

        @functools.wraps(inner)
        def part(*a: Any, **k: Any) -> Any:
            if threading.current_thread() is not agent:
                return inner(*a, **k)
            started = time.thread_time()
            try:
                return inner(*a, **k)
            finally:
                turn[label] = turn.get(label, 0.0) + time.thread_time() - started

        setattr(owner, name, part)

    timed(_secrets.SessionSecrets, "catch_up", "catch_up")
    timed(_answered_view.AnsweredWidening, "widen", "widen")
    timed(_masking.Masking, "_apply", "apply")
    from contextfold.cache import ToolOutputCache

    timed(ToolOutputCache, "mask", "batch")

    current: dict[str, Any] = {}  # the _mask_one call running on the agent's thread
    still = masking._still_holds

    def still_holds(built: Any, secrets: Any, ref_id: str, text: str | None, cache: Any) -> bool:
        if threading.current_thread() is not agent:
            return still(built, secrets, ref_id, text, cache)
        started = time.thread_time()
        held = still(built, secrets, ref_id, text, cache)
        current["still"] = current.get("still", 0.0) + time.thread_time() - started
        current["held"] = held
        if not held:  # (why: outside the timers)
            redactor = getattr(secrets, "_redactor", secrets)
            state = built.state
            memory = getattr(redactor, "memory", None)
            learned = memory.learned_since(state[2]) if memory is not None and isinstance(state, tuple) else ()
            whole = text if text is not None else cache.get(ref_id)
            words = "\n".join(built.asked)
            current["why"] = ("output" if any(v in whole for v in learned) else
                              "asked words" if any(v in words for v in learned) else "asked words (piece)")
            current["empty"] = "mentioned:" not in built.placeholder
            current["long"] = len(whole) > 3000
        return held

    masking._still_holds = still_holds

    for name in ("light_digest", "output_digest"):
        if hasattr(masking, name):
            digest = getattr(masking, name)

            def built_here(*a: Any, _digest: Callable[..., Any] = digest, **k: Any) -> Any:
                if threading.current_thread() is agent:
                    current["built"] = True
                return _digest(*a, **k)

            setattr(masking, name, built_here)

    mask_one = masking._mask_one

    def mask_one_classified(message: Any, cache: Any, digest_tokens: int = 0, known: str = "", counter: Any = None,
                            secrets: Any = None, digest_kind: str = "full") -> Any:
        if threading.current_thread() is not agent:
            return mask_one(message, cache, digest_tokens, known, counter, secrets, digest_kind)
        memo = getattr(cache, "placeholders", None)
        ref_id = message.meta.get("ref")
        if not (isinstance(ref_id, str) and cache.contains(ref_id)):
            text = masking._text_of(message)
            staged = cache._ref_ids.staged(text)  # (not staged here: the turn's own put does that when needed)
            ref_id = staged[0] if staged is not None else masking.ref_id_for(text.encode("utf-8", "surrogatepass"))
        key = masking._memo_key(ref_id, known, digest_tokens, counter.counter, digest_kind)
        before = memo.get(key) if memo is not None else None
        current.clear()
        started = time.thread_time()
        out = mask_one(message, cache, digest_tokens, known, counter, secrets, digest_kind)
        spent = time.thread_time() - started
        if before is None:
            kind = "unbuilt"
        elif "held" in current and not current["held"]:
            kind = "invalidated"
            why[current["why"]] += 1
            why["empty placeholder" if current["empty"] else "listing placeholder"] += 1
            why["long output" if current["long"] else "short output"] += 1
        elif before.masked is None or before.masked[0]() is not message:
            kind = "other"
        elif "held" in current:
            kind = "held"
        else:
            kind = "swapped"
        outputs = turn.setdefault("outputs", [])
        outputs.append((kind, spent, current.get("still", 0.0)))
        return out

    masking._mask_one = mask_one_classified

    policy = None if args.digest is None else {"mask_digest": args.digest}
    turns: list[dict[str, Any]] = []
    sessions = sorted(load_sessions(args.data), key=lambda s: s.id)[: args.sessions]
    for n, session in enumerate(sessions):
        cm = ContextManager("gpt-4o", max_context_tokens=args.window, store="memory", archive="memory",
                            session_id=f"causes-{n}", policy=policy)
        cm.counter.wait_exact()
        added = 0
        messages = session.messages
        for index, answer in enumerate(messages):
            if answer.role != "assistant":
                continue
            if messages[added:index]:
                cm.add(messages[added:index])
                added = index
            maskings, compactions = cm.maskings, cm.compactions
            gc.collect()
            turn.clear()
            started = time.thread_time()
            cm.prepare()
            used = time.thread_time() - started
            if cm.maskings > maskings and cm.compactions == compactions:
                turns.append({"cpu": used, **turn})
            _background.wait_idle()
            cm.add(answer)
            added = index + 1
        cm.close()

    turns.sort(key=lambda t: t["cpu"])
    slow = turns[len(turns) - max(1, len(turns) // 50):]
    middle = turns[len(turns) // 4: 3 * len(turns) // 4]
    cpu = [t["cpu"] * 1000 for t in turns]
    p99 = cpu[min(len(cpu) - 1, int(0.99 * len(cpu)))]
    print(f"digest {args.digest or 'default'}: {len(turns)} masking turns, CPU p50/p90/p99 (timers in) "
          f"{statistics.median(cpu):.2f}/{cpu[int(0.9 * len(cpu))]:.2f}/{p99:.2f} ms")
    print(f"{'class':<12} | {'outputs':>7} | {'turns':>5} | {'mean us':>7} | {'of which check':>14} | "
          f"{'total ms':>8} | {'per slow turn':>13} | {'per middle turn':>15}")
    for kind in CLASSES:
        spent = [(s, c) for t in turns for k, s, c in t.get("outputs", ()) if k == kind]
        having = sum(1 for t in turns if any(k == kind for k, _, _ in t.get("outputs", ())))
        total = sum(s for s, _ in spent)
        slow_ms = sum(s for t in slow for k, s, _ in t.get("outputs", ()) if k == kind) / len(slow) * 1000
        middle_ms = sum(s for t in middle for k, s, _ in t.get("outputs", ()) if k == kind) / len(middle) * 1000
        mean = total / len(spent) * 1e6 if spent else 0.0
        check = sum(c for _, c in spent) / len(spent) * 1e6 if spent else 0.0
        print(f"{kind:<12} | {len(spent):>7} | {having:>5} | {mean:>7.0f} | {check:>14.0f} | {total * 1000:>8.1f} | "
              f"{slow_ms:>13.3f} | {middle_ms:>15.3f}")
    print("invalidated, why: " + ", ".join(f"{k} {v}" for k, v in sorted(why.items())))
    print(f"{'part':<12} | {'per slow turn ms':>16} | {'per middle turn ms':>18} | turns with it")
    for part in ("catch_up", "batch", "apply", "widen"):
        print(f"{part:<12} | {sum(t.get(part, 0.0) for t in slow) / len(slow) * 1000:>16.3f} | "
              f"{sum(t.get(part, 0.0) for t in middle) / len(middle) * 1000:>18.3f} | "
              f"{sum(1 for t in turns if t.get(part))}")
    print("slowest turns: " + "; ".join(
        f"{t['cpu'] * 1000:.2f} ms " + ",".join(f"{k[0]}{s * 1e6:.0f}" for k, s, _ in t.get("outputs", ())
                                                 if k != "swapped")
        + f" widen {t.get('widen', 0) * 1000:.2f}" for t in slow))
    if args.json:
        args.json.write_text(json.dumps(turns))


if __name__ == "__main__":
    sys.exit(main())
