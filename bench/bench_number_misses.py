"""Where contextfold's missing numbers come from: each number a turn uses that is not in its view, explained.

``number_recall`` counts every bare number of 3+ digits a turn uses that occurred earlier anywhere in the session.
That is the issue's metric and the figure we report; this script does not change it. It says, for each number the
view lacks, what happened to the message that last held it (cut at write time, masked, summarized away) and how
the turn used it, so that a reader can judge the misses:

- ``line number only``: the number occurred earlier only as the line-number column of a numbered file listing
  (``   150\\t    \"\"\"``), never in the text of a line; ``same file`` / ``other file`` says whether that listing was
  of the file the turn's call reads. A ``view_range [150, 200]`` after a listing of another file that happened to
  have a line 150 is counted as a miss, though nothing was there to recall.
- ``in text``: the number occurred in the text of a message (an elision ``eliding lines 1054-1077``, a value).

    PYTHONPATH=src python bench/bench_number_misses.py [--sources lm32b,claude,tau] [--list]
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from bench_quality import DATA, SOURCES  # the same sessions and windows as the side-by-side tables

from contextfold.importers._files import load_sessions
from contextfold.messages import Message
from contextfold.replay.harness import ReplayOptions, SessionReplayer
from contextfold.replay.metrics import contains_fact, is_number_fact, message_search_text, session_totals, turn_entities

# A numbered listing's line: the number, then a tab or spaces, then the line's text (cat -n, SWE-agent's viewer).
_GUTTER = re.compile(r"^\s*(\d+)(?:\t| {1,8})", re.MULTILINE)
_LISTED_FILE = re.compile(r"running `cat -n` on (\S+?):?\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Miss:
    session: str
    turn: int
    number: str
    fate: str  # what the view holds of the message that last had it
    origin: str  # "line number only" or "in text"
    same_file: bool | None  # for line numbers: was the listing of the file the turn's call reads
    line: str


def _fate(source: Message, view: list[Message]) -> str:
    if source.role != "tool":
        return "summarized away" if not any(v.text == source.text for v in view) else "in view"
    shown = next((v for v in view if v.role == "tool" and v.tool_call_id == source.tool_call_id), None)
    if shown is None:
        return "summarized away"
    if shown.kind == "masked" or shown.text.startswith("[tool output trimmed"):
        return "masked"
    return "cut at write time" if len(shown.text) < len(source.text) else "whole"


def _origin(number: str, text: str) -> str:
    without_gutters = _GUTTER.sub("", text)
    return "in text" if contains_fact(without_gutters, number) else "line number only"


def _call_paths(answer: Message) -> set[str]:
    paths = set()
    for call in answer.tool_calls:
        try:
            arguments = json.loads(call.arguments)
        except ValueError:
            continue
        if isinstance(arguments, dict) and isinstance(arguments.get("path"), str):
            paths.add(arguments["path"])
    return paths


class _Explaining(SessionReplayer):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.misses: list[Miss] = []

    def _listed_file(self, source: Message, text: str) -> str | None:
        """The file a listing shows: from its header, or from the path argument of the call that produced it."""
        header = _LISTED_FILE.search(text)
        if header is not None:
            return header.group(1)
        for message in self.session.messages:
            for call in message.tool_calls:
                if call.id == source.tool_call_id:
                    paths = _call_paths(Message("assistant", "", (call,)))
                    return next(iter(paths), None)
        return None

    def _retention(self, metrics: Any, index: int, answer: Message, view: list[Message]) -> None:
        super()._retention(metrics, index, answer, view)
        view_text = "\n".join(message_search_text(m) for m in view)
        for fact in sorted(turn_entities(answer)):
            seen = self._state.last_seen.get(fact)
            if seen is None or not is_number_fact(fact) or contains_fact(view_text, fact):
                continue
            source = self.session.messages[seen]
            text = message_search_text(source)
            origin = _origin(fact, text)
            listed = self._listed_file(source, text)
            same = None if origin == "in text" or listed is None else listed in _call_paths(answer)
            line = next((ln.strip() for ln in text.splitlines() if contains_fact(ln, fact)), "")
            self.misses.append(Miss(self.session.id, index, fact, _fate(source, view), origin, same, line[:90]))


def _listing(miss: Miss) -> str:
    if miss.origin == "in text":
        return ""
    return "unknown" if miss.same_file is None else ("same file" if miss.same_file else "other file")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sources", default="lm32b,claude,tau")
    parser.add_argument("--list", action="store_true", help="print every miss")
    args = parser.parse_args()
    for name in args.sources.split(","):
        path, window = SOURCES[name]
        misses: list[Miss] = []
        needed = in_view = 0
        for session in load_sessions(DATA / path):
            replayer = _Explaining(session, ReplayOptions(window=window))
            totals = session_totals(replayer.run()["series"])
            needed += totals["needed_numbers"]
            in_view += totals["numbers_in_view"]
            misses.extend(replayer.misses)
        print(f"\n{name} @ {window:,}: number recall {in_view / max(needed, 1):.1%} ({in_view} of {needed}); "
              f"{len(misses)} misses")
        kinds = Counter((m.origin, _listing(m), m.fate) for m in misses)
        print(f"{'count':>6}  {'origin':<17} {'listing':<11} fate")
        for (origin, listing, fate), count in kinds.most_common():
            print(f"{count:>6}  {origin:<17} {listing:<11} {fate}")
        coincidental = sum(1 for m in misses if m.origin == "line number only" and m.same_file is False)
        print(f"line numbers seen only in another file's listing: {coincidental}; number recall without them "
              f"{in_view / max(needed - coincidental, 1):.1%} (for reading the misses; the metric stays as above)")
        if args.list:
            for m in misses:
                print(f"  {m.session[:30]:<30} turn {m.turn:>3}  {m.number:>6}  {m.fate:<18} {m.origin:<17} {m.line}")


if __name__ == "__main__":
    main()
