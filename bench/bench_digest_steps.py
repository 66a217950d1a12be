"""The steps of one output's digest (material and placeholder) timed alone, over the outputs the lm32b loop digests.

``bench_read_ahead_parts.py`` splits the read-ahead by part inside the loop, with a thread timer around each call
(~2-4 us each: the steps called most read high, and the load moves its figures by 2x between runs). This records what
the loop's read-ahead digests (each text its material is ranked from; each digest's candidates, the call's arguments
and budget), then times each step over those inputs in one thread, best of ``--reps``, in microseconds per output:

- the material (``cache/_digest._rank``) with the entity and number memos cleared (the unit memo warm: the words seen
  before) and with them warm (an output whose entities ``add()`` read), and its steps: the window, the whole-word
  mentions, the definitions, the entities, the bare numbers;
- the digest's walk over its candidates (each item counted; no secrets asked);
- the items' secret checks as the read-ahead asks them (``Redactor.clean_words`` of each digest's first
  ``DIGEST_ITEMS_SCANNED_TOGETHER`` candidates, a fresh session's redactor answering);
- the placeholder's own count.

``--dump FILE`` writes every material and digest (pickled) to compare two trees' outputs: run it with each tree's
``PYTHONPATH`` and ``cmp`` the files (the inputs are recorded again by each run: the same texts, the loop being
deterministic in what it digests). Run: PYTHONPATH=src python bench/bench_digest_steps.py [--sessions 30]
[--reps 3] [--dump FILE]
"""

from __future__ import annotations

import argparse
import pickle
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from _timing import DATA, best_cpu, replay_loop


def _record(data: Path, sessions: int) -> tuple[list[str], list[tuple[tuple[str, ...], str, int]]]:
    """The texts the loop's read-ahead ranked, and each digest it walked (candidates, call's arguments, budget)."""
    from contextfold.cache import _digest, masking

    agent = threading.current_thread()
    texts: list[str] = []
    walks: list[tuple[tuple[str, ...], str, int]] = []
    rank, walk = _digest._rank, masking.output_digest

    def ranked(text: str) -> Any:
        if threading.current_thread() is not agent:
            texts.append(text)
        return rank(text)

    def walked(text: str, *, budget_tokens: int, counter: Any, known: str = "", material: Any = None,
               allow: Any = None) -> str:
        if threading.current_thread() is not agent and material is not None:
            walks.append((tuple(material), known, budget_tokens))
        return walk(text, budget_tokens=budget_tokens, counter=counter, known=known, material=material, allow=allow)

    _digest._rank = ranked
    masking.output_digest = walked  # type: ignore[assignment]
    try:
        replay_loop(data, sessions, session_prefix="steps", policy={"mask_digest": "full"})  # (light is the default)
    finally:
        _digest._rank = rank
        masking.output_digest = walk
    return texts, walks


def _best(step: Callable[[Any], Any], inputs: Sequence[Any], reps: int,
          before: Callable[[], None] | None = None) -> float:
    """The best of ``reps`` runs of ``step`` over ``inputs``: microseconds of thread CPU per input."""
    return best_cpu(lambda: [step(item) for item in inputs], reps, before) / max(1, len(inputs)) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=30, help="the first N lm32b sessions by id")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--data", type=Path, default=DATA, help="the recorded lm32b sessions")
    parser.add_argument("--dump", type=Path, default=None, help="write every material and digest here (pickle)")
    args = parser.parse_args()

    from contextfold.cache import _digest
    from contextfold.manager._read_ahead import DIGEST_ITEMS_SCANNED_TOGETHER
    from contextfold.redact import Redactor
    from contextfold.summarize import entities
    from contextfold.tokens.counting import TiktokenCounter

    texts, walks = _record(args.data, args.sessions)
    sources = {id(text): _digest.digest_source(text)[0] for text in texts}
    partial = sum(1 for text in texts if len(sources[id(text)]) != len(text))
    print(f"{len(texts):,} materials ranked ({partial:,} read at their two ends), {len(walks):,} digests walked")

    def cold() -> None:
        entities._cache.clear()
        entities._numbers_cache.clear()

    def source(text: str) -> str:
        return sources[id(text)]

    rows: list[tuple[str, float]] = [
        ("material, entities and numbers not remembered", _best(_digest._rank, texts, args.reps, cold)),
        ("  window (digest_source)", _best(_digest.digest_source, texts, args.reps)),
        ("  whole-word mentions", _best(lambda t: _digest._mention_counts(source(t)), texts, args.reps)),
        ("  definitions", _best(lambda t: _digest._definitions(source(t)), texts, args.reps)),
        ("  entities (words remembered)", _best(lambda t: entities.entity_kinds(source(t)), texts, args.reps,
                                                cold)),
        ("  bare numbers", _best(lambda t: entities.bare_numbers(source(t)), texts, args.reps, cold)),
        ("material, entities and numbers remembered", _best(_digest._rank, texts, args.reps)),
    ]
    counter = TiktokenCounter("o200k_base")
    counter.wait_ready()

    def walk(entry: tuple[tuple[str, ...], str, int]) -> str:
        items, known, budget = entry
        return _digest.output_digest("", budget_tokens=budget, counter=counter, known=known, material=items)

    digests = [walk(entry) for entry in walks]  # (and every item counted once: the walk's counts are remembered)
    rows.append(("digest's walk (items counted, no secrets asked)", _best(walk, walks, args.reps)))
    chunks = [[item for item in items if not (known and item in known)][:DIGEST_ITEMS_SCANNED_TOGETHER]
              for items, known, _ in walks]
    redactor = Redactor()
    redactor.redact_text("warm the patterns")

    def forget() -> None:
        redactor._mentioned = None  # (a fresh session's answers: every item asked for the first time)

    rows.append(("items' secret checks (clean_words, first asks)",
                 _best(redactor.clean_words, chunks, args.reps, forget)))
    placeholders = [f"[tool output trimmed; ref=tout_{n:016x}; it mentioned: {digest}]"
                    for n, digest in enumerate(digests)]
    rows.append(("placeholder's count (not remembered)",
                 _best(lambda p: len(counter.encoding.encode_ordinary(p)), placeholders, args.reps)))
    for label, us in rows:
        print(f"  {label:52s} {us:7.1f} us an output")
    if args.dump is not None:
        cold()
        args.dump.write_bytes(pickle.dumps(([_digest._rank(text) for text in texts], digests)))
        print(f"materials and digests written to {args.dump}")


if __name__ == "__main__":
    main()
