"""The steps of one light digest (``cache/_light_digest.py``) timed alone, over the outputs the lm32b loop digests.

``bench_read_ahead_parts.py --digest light`` times the light digests inside the loop as one part. This records what
the loop's read-ahead hands ``masking._light_placeholder`` (the whole output, the call's arguments, the budget, the
counter and the session's secrets), then times each step over those inputs in one thread, best of ``--reps``, in
microseconds per output:

- blanking the session's secrets (``secrets.blank`` of the whole output);
- what the digest reads: the whole output blanked, or (a tree before the seventeenth session) its two windows;
- its entities, with the windows' cold (their memo entries dropped: a window is read by nothing else) and warm;
- the walk over the candidates (each item counted, as ``digest_items`` does);
- the joined secret check of the items chosen;
- the whole light digest as the placeholder builds it, windows cold and all warm.

``--dump FILE`` writes every digest (pickled) to compare two trees' outputs: run it with each tree's ``PYTHONPATH``
and ``cmp`` the files. Run: PYTHONPATH=src python bench/bench_light_digest_steps.py [--sessions 69] [--reps 3]
[--dump FILE]
"""

from __future__ import annotations

import argparse
import pickle
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _timing import DATA, best_cpu, replay_loop


class Input:
    """One light digest the loop's read-ahead built: its whole output and what the placeholder passed with it."""

    def __init__(self, whole: str, known: str, budget: int, counter: Any, secrets: Any) -> None:
        self.whole, self.known, self.budget, self.counter, self.secrets = whole, known, budget, counter, secrets


def _record(data: Path, sessions: int) -> list[Input]:
    """What the loop's read-ahead handed the light placeholder, in order (its managers are closed after)."""
    from contextfold.cache import masking

    agent = threading.current_thread()
    inputs: list[Input] = []
    build = masking._light_placeholder

    def recorded(ref_id: str, text: str | None, cache: Any, digest_tokens: int, known: str, counter: Any,
                 secrets: Any, *rest: Any) -> str:
        if threading.current_thread() is not agent:
            whole = text if text is not None else cache.get(ref_id)
            inputs.append(Input(whole, known, digest_tokens, counter, secrets))
        return build(ref_id, text, cache, digest_tokens, known, counter, secrets, *rest)

    masking._light_placeholder = recorded
    try:
        replay_loop(data, sessions, session_prefix="light-steps", policy={"mask_digest": "light"})
    finally:
        masking._light_placeholder = build
    return inputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=69, help="the first N lm32b sessions by id")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--data", type=Path, default=DATA, help="the recorded lm32b sessions")
    parser.add_argument("--dump", type=Path, default=None, help="write every digest here (pickle)")
    args = parser.parse_args()

    from contextfold._memo import text_key
    from contextfold.cache import _light_digest
    from contextfold.cache._digest import digest_items
    from contextfold.summarize import entities

    inputs = _record(args.data, args.sessions)
    n = len(inputs)
    limit = getattr(_light_digest, "LIGHT_MAX_CHARS", None)  # (None: a tree whose light digest reads two windows)
    if limit is None:
        from contextfold.cache._digest import digest_source

        def source(i: Input) -> str:
            return digest_source(i.secrets.blank(i.whole), _light_digest.LIGHT_HEAD_CHARS,
                                 _light_digest.LIGHT_TAIL_CHARS)[0]

        def digest(i: Input) -> Any:
            return _light_digest.light_digest(i.secrets.blank(i.whole), budget_tokens=i.budget, counter=i.counter,
                                              known=i.known, mentions_secret=i.secrets.mentions_secret)
    else:
        def source(i: Input) -> str:
            return "" if len(i.whole) > limit else i.secrets.blank(i.whole)

        def digest(i: Input) -> Any:
            return _light_digest.light_digest(i.whole, budget_tokens=i.budget, counter=i.counter, known=i.known,
                                              mentions_secret=i.secrets.mentions_secret, blank=i.secrets.blank)

    sources = [source(i) for i in inputs]
    long = [len(i.whole) > 3_000 for i in inputs]
    cut = [text_key(text) for text, far in zip(sources, long) if far and text]  # (windows: read by nothing else)
    kinds = [entities.entity_kinds(text) for text in sources]
    chosen = [digest_items(_light_digest._candidates(k), i.budget, i.counter, i.known) for i, k in zip(inputs, kinds)]

    def forget() -> None:  # (the windows' entities only: a whole short output's were read when it was added)
        for key in cut:
            entities._cache._entries.pop(key, None)

    def whole_digest() -> None:
        for i in inputs:
            digest(i)

    steps: list[tuple[str, Callable[[], None], Callable[[], None] | None]] = [
        ("blank (whole output)", lambda: [i.secrets.blank(i.whole) for i in inputs] and None, None),
        ("what is read (window or whole, blanked)", lambda: [source(i) for i in inputs] and None, None),
        ("entities, windows cold", lambda: [entities.entity_kinds(text) for text in sources] and None, forget),
        ("entities, all warm", lambda: [entities.entity_kinds(text) for text in sources] and None, None),
        ("walk (candidates counted)", lambda: [digest_items(_light_digest._candidates(k), i.budget, i.counter,
                                                            i.known) for i, k in zip(inputs, kinds)] and None, None),
        ("joined secret check", lambda: [i.secrets.mentions_secret("\n".join(c)) for i, c in zip(inputs, chosen)
                                         if c] and None, None),
        ("whole light digest, windows cold", whole_digest, forget),
        ("whole light digest, all warm", whole_digest, None),
    ]
    print(f"{n:,} light digests ({sum(len(i.whole) for i in inputs) / max(n, 1):,.0f} characters an output on "
          f"average, {sum(long):,} over 3,000)")
    for label, step, before in steps:
        seconds = best_cpu(step, args.reps, before)
        print(f"  {label:40s} {seconds / max(n, 1) * 1e6:8.1f} us an output")
    if args.dump is not None:
        args.dump.write_bytes(pickle.dumps([tuple(digest(i)) for i in inputs]))


if __name__ == "__main__":
    main()
