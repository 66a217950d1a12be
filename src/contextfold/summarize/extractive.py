"""The built-in extractive summarizer: no LLM, deterministic, good enough to run an agent offline.

It writes the task_state sections from what the history literally says: the user's requests verbatim (truncated
only when they do not fit), the key entities listed densely and ranked by use, the decisions stated, the actions
taken and their outcomes, and the latest plan. User constraints and ids go to ``retain``. Everything fits
``request.max_tokens`` as counted by the budget tokenizer.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence

from ..tokens import TokenCounter
from .base import SummaryRequest, SummaryResult, default_counter, validate_request
from .digest import Digest, EntityStat, digest_messages

__all__ = ["ExtractiveSummarizer"]

# Retained facts are kept word for word and repeated outside the summary, so they get a bounded slice.
RETAIN_SHARE = 0.15
# First-pass shares of the summary budget; what a section leaves unused goes to the next by priority. The user's
# own words come first (they define the task and are usually short), then the entities: the measure of a summary
# is whether the agent can still name what it worked on. Narrative sections get the rest.
SECTION_SHARES: dict[str, float] = {
    "User requests": 0.45,
    "Key entities": 0.30,
    "Decisions": 0.05,
    "Progress": 0.10,
    "Next steps": 0.05,
    "Earlier": 0.05,
}
# Who gets leftover budget first, in this order.
LEFTOVER_ORDER = ("User requests", "Key entities", "Progress", "Decisions", "Next steps", "Earlier")
RENDER_ORDER = ("User requests", "Key entities", "Decisions", "Progress", "Next steps", "Earlier")
# A user request cut shorter than this says too little to be worth its bullet.
MIN_TRUNCATED_TOKENS = 24
# The action log keeps the most recent actions; older ones are summarized by the entities they touched.
MAX_ACTIONS = 15
MAX_OUTCOMES = 8
MAX_PLAN_LINES = 12
# Entities listed per kind in a retained line asked for by a retain directive ("keep the failing test names").
MAX_RETAINED_PER_KIND = 25
_TRUNCATION_MARK = " […] "
# The least an item costs: an entity its token (a value is never empty) and its separator, any other item its bullet
# and line end. With less room than this left, a section is full.
MIN_ITEM_COST = 2
# Items in a row that do not fit after which a section is taken as full (a shorter one further down might still
# fit: the last few tokens of a section are not worth counting thousands of names for).
MAX_MISSES = 32
# Bare numbers listed at most (the best ranked): a JSON answer holds dozens (every fare of every flight), and
# listing them all crowded the actions out of the summary.
MAX_BARE_NUMBERS = 12
_BARE_NUMBER = re.compile(r"\d+(?:\.\d+)?")

_KIND_LABELS: dict[str, str] = {"path": "files", "url": "urls", "test": "tests", "error": "errors",
                                "identifier": "identifiers", "id": "ids", "number": "numbers", "flag": "flags",
                                "email": "emails"}
# Words in directives and instructions that ask for a kind of entity to be kept.
_DIRECTIVE_KINDS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\btests?\b", re.I), "test"),
    (re.compile(r"\b(files?|paths?)\b", re.I), "path"),
    (re.compile(r"\b(errors?|exceptions?|tracebacks?)\b", re.I), "error"),
    (re.compile(r"\b(ids?|identifiers?|numbers?)\b", re.I), "id"),
    (re.compile(r"\b(urls?|links?)\b", re.I), "url"),
    (re.compile(r"\b(functions?|classes|symbols?|names?)\b", re.I), "identifier"),
)


def _directive_kinds(texts: Sequence[str]) -> list[str]:
    kinds: list[str] = []
    for text in texts:
        for pattern, kind in _DIRECTIVE_KINDS:
            if pattern.search(text) and kind not in kinds:
                kinds.append(kind)
    return kinds


class _Budget:
    """Token costs with a per-string cache (entities repeat across sections and passes)."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self._cache: dict[str, int] = {}

    def cost(self, text: str) -> int:
        n = self._cache.get(text)
        if n is None:
            n = self._cache[text] = self.counter.count(text)
        return n

    def truncate(self, text: str, budget: int) -> str | None:
        """``text`` cut in the middle to about ``budget`` tokens, or None when that would say too little."""
        if budget < MIN_TRUNCATED_TOKENS:
            return None
        total = self.cost(text)
        keep_chars = int(len(text) * (budget - self.cost(_TRUNCATION_MARK)) / max(total, 1))
        while keep_chars > 0:
            head = keep_chars * 2 // 3
            cut = text[:head].rstrip() + _TRUNCATION_MARK + text[len(text) - (keep_chars - head) :].lstrip()
            if self.cost(cut) <= budget:
                return cut
            keep_chars = keep_chars * 9 // 10
        return None


class ExtractiveSummarizer:
    """Summarizes without a model: verbatim requests, ranked entities, decisions, actions and the latest plan.

    Deterministic: the same request always gives the same result.

    Example:
        >>> from contextfold.messages import Message
        >>> result = ExtractiveSummarizer().summarize(SummaryRequest((Message.user("Fix tests/test_api.py"),)))
        >>> "tests/test_api.py" in result.summary
        True
    """

    name = "extractive"

    def __init__(self, *, counter: TokenCounter | None = None) -> None:
        self._counter = counter

    @property
    def counter(self) -> TokenCounter:
        """The tokenizer summaries are budgeted with (resolved on first use)."""
        if self._counter is None:
            self._counter = default_counter()
        return self._counter

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Summarize ``request.messages`` into task_state sections within ``request.max_tokens``."""
        validate_request(request)
        budget = _Budget(self.counter)
        digest = digest_messages(request.messages, request.previous_summary)
        wanted = [*request.summary_directives, *request.retain_directives, request.instructions or ""]
        boost = _directive_kinds(wanted)
        ranked = digest.ranked_entities(boost)

        retain_asks = [*request.retain_directives, request.retain_prompt or ""]
        retain = _choose_retain(digest, ranked, _directive_kinds(retain_asks), budget,
                                int(request.max_tokens * RETAIN_SHARE), request.verbatim)
        retain_cost = sum(budget.cost(fact) + 1 for fact in retain)
        summary_budget = request.max_tokens - retain_cost
        # brief / decision_log / code_delta have layouts of their own (summarize/shapes.py, imported on first use to
        # keep the package's import time down); task_state is below.
        summary = None
        if request.strategy in ("brief", "decision_log", "code_delta"):
            from .shapes import shape_summary

            summary = shape_summary(request.messages, digest, ranked, request.strategy, summary_budget, budget.cost)
        if summary is None:
            chosen = _allocate(_candidates(digest, ranked, request.verbatim), budget, summary_budget)
            summary = _fit_total(chosen, digest, budget, summary_budget)
        return SummaryResult(
            summary=summary,
            retain=tuple(retain),
            summarizer=self.name,
            input_tokens=None,
            output_tokens=budget.cost(summary) + retain_cost,
        )


# -- choosing --------------------------------------------------------------------------------------------------


def _choose_retain(digest: Digest, ranked: list[EntityStat], kinds: list[str], budget: _Budget,
                   limit: int, verbatim: Sequence[str] = ()) -> list[str]:
    facts: list[str] = []
    for kind in kinds:
        values = [s.value for s in ranked if s.kind == kind][:MAX_RETAINED_PER_KIND]
        if values:
            facts.append(f"{_KIND_LABELS[kind]}: {', '.join(values)}")
    facts.extend(digest.retained)
    # A constraint sentence of a request that stays in the view word for word is already there.
    facts.extend(c for c in digest.constraints if not any(c in text for text in verbatim))
    chosen: list[str] = []
    used = 0
    for fact in facts:
        cost = budget.cost(fact) + 1
        if fact not in chosen and used + cost <= limit:
            chosen.append(fact)
            used += cost
    return chosen


_Candidate = tuple[str, int]  # (rendered item, position used to put items back in reading order)


def _request_order(requests: list[tuple[int, str]]) -> list[int]:
    """Positions of user requests by importance: the first (the task), the latest, then newest to oldest."""
    if not requests:
        return []
    order = [0]
    if len(requests) > 1:
        order.append(len(requests) - 1)
    order.extend(range(len(requests) - 2, 0, -1))
    return order


def _in_view(request: str, texts: Sequence[str], exact: Collection[str]) -> bool:
    """Whether ``request`` stays in the view word for word (``texts``: the kept messages stripped; ``exact``: a set).

    It does when it equals a kept message, or, cut by an earlier summary (``head […] tail``), when it is the head and
    tail of one; never as a mere substring ("yes" is not kept by "yes, but later").
    """
    head, mark, tail = request.partition(_TRUNCATION_MARK.strip())
    if not mark:
        return request in exact
    head, tail = head.rstrip(), tail.lstrip()
    return any(text.startswith(head) and text.endswith(tail) and len(text) > len(head) + len(tail) for text in texts)


def _candidates(digest: Digest, ranked: list[EntityStat], verbatim: Sequence[str] = ()) -> dict[str, list[_Candidate]]:
    """Each section's items, best first, with their reading-order position.

    User requests that stay in the view word for word (``verbatim``) are not repeated.
    """
    bare = [s for s in ranked if s.kind == "number" and _BARE_NUMBER.fullmatch(s.value)]
    if len(bare) > MAX_BARE_NUMBERS:
        dropped = {id(s) for s in bare[MAX_BARE_NUMBERS:]}
        ranked = [s for s in ranked if id(s) not in dropped]
    texts = [text.strip() for text in verbatim]  # (once: stripping them per request was quadratic)
    exact = set(texts)
    requests = [r for r in digest.user_requests if not _in_view(r[1], texts, exact)]
    sections: dict[str, list[_Candidate]] = {
        "User requests": [(requests[i][1], i) for i in _request_order(requests)],
        "Key entities": [(f"{s.kind}\x00{s.value}", i) for i, s in enumerate(ranked)],
    }
    decisions = list(dict.fromkeys(text for _, text in digest.decisions))
    sections["Decisions"] = [(text, i) for i, text in reversed(list(enumerate(decisions)))]
    actions = list(dict.fromkeys(reversed(digest.actions)))[:MAX_ACTIONS]
    outcomes = list(dict.fromkeys(text for _, text in reversed(digest.outcomes)))[:MAX_OUTCOMES]
    progress = [(f"result: {text}", -i) for i, text in enumerate(outcomes)]
    progress += [(f"did: {text}", -1000 - i) for i, text in enumerate(actions)]
    sections["Progress"] = sorted(progress, key=lambda c: (0 if c[0].startswith("result") else 1, -c[1]))
    sections["Next steps"] = [(line, i) for i, line in enumerate(digest.plan[-MAX_PLAN_LINES:])]
    sections["Earlier"] = [(line, i) for i, line in enumerate(digest.earlier)]
    return sections


def _take(items: list[_Candidate], budget: _Budget, limit: int, taken: list[_Candidate],
          cost_of: Callable[[str], int], truncate: bool) -> int:
    """Add items that fit within ``limit`` to ``taken`` (best first); return the tokens used in total."""
    used = sum(cost_of(text) for text, _ in taken)
    have = {position for _, position in taken}
    misses = 0
    for text, position in items:
        if not truncate and (limit - used < MIN_ITEM_COST or misses >= MAX_MISSES):
            # Full, or as good as full. (Walking on counted every one of ~13,000 entities of a 1.6M-token history,
            # most never counted before, to fill its last token or two: a quarter of a cold compaction, issue 22.)
            break
        if position in have:
            continue
        cost = cost_of(text)
        if used + cost <= limit:
            taken.append((text, position))
            have.add(position)
            used += cost
            misses = 0
        elif not truncate:
            misses += 1  # a shorter item further down may still fit
        else:
            cut = budget.truncate(text, limit - used - 2)
            if cut is not None:
                taken.append((cut, position))
                have.add(position)
                used += cost_of(cut)
    return used


def _allocate(candidates: dict[str, list[_Candidate]], budget: _Budget, total: int) -> dict[str, list[_Candidate]]:
    """Fill each section to its share, then hand what is left to sections in priority order."""
    taken: dict[str, list[_Candidate]] = {name: [] for name in candidates}

    def cost_of(text: str) -> int:
        # An entity costs its tokens plus a separator; other items cost their bullet line.
        return budget.cost(text.split("\x00", 1)[1]) + 1 if "\x00" in text else budget.cost(text) + 2

    used: dict[str, int] = {}
    for name, items in candidates.items():
        used[name] = _take(items, budget, int(total * SECTION_SHARES[name]), taken[name], cost_of,
                           truncate=name == "User requests")
    for name in LEFTOVER_ORDER:
        spare = total - sum(used.values())
        if spare <= 0:
            break
        if name == "Key entities":
            _drop_covered(taken[name])
        used[name] = _take(candidates[name], budget, used[name] + spare, taken[name], cost_of,
                           truncate=name == "User requests")
    _drop_covered(taken["Key entities"])
    return taken


def _drop_covered(entities: list[_Candidate]) -> None:
    """Remove entities spelled out inside a longer listed one (``client.py`` inside its full path)."""
    values = [text.split("\x00", 1)[1] for text, _ in entities]
    joined = "\n".join(values)
    keep = [c for c, v in zip(entities, values, strict=True) if joined.count(v) <= 1]
    entities[:] = keep


# -- rendering -------------------------------------------------------------------------------------------------


def _render(chosen: dict[str, list[_Candidate]], digest: Digest) -> str:
    lines = [f"Extractive summary of {digest.count} earlier messages."]
    if digest.unread:
        lines[0] += (f" The {digest.unread:,} in the middle were not read for it (too many); they are in the archive,"
                     " whole.")
    for name in RENDER_ORDER:
        items = chosen.get(name) or []
        if not items:
            continue
        lines.append(f"## {name}")
        if name == "Key entities":
            by_kind: dict[str, list[str]] = {}
            for text, _ in sorted(items, key=lambda c: c[1]):
                kind, value = text.split("\x00", 1)
                by_kind.setdefault(kind, []).append(value)
            lines.extend(f"{_KIND_LABELS[kind]}: {', '.join(vals)}" for kind, vals in by_kind.items())
            continue
        ordered = sorted(items, key=lambda c: c[1])
        # Requests stay byte for byte (no re-indenting), so a user's words can be found verbatim in the summary.
        lines.extend("- " + (text if name == "User requests" else text.replace("\n", "\n  ")) for text, _ in ordered)
    return "\n".join(lines)


def _fit_total(chosen: dict[str, list[_Candidate]], digest: Digest, budget: _Budget, limit: int) -> str:
    """Render, and while the whole is over ``limit`` drop the lowest-ranked items (separators are estimates)."""
    text = _render(chosen, digest)
    while budget.counter.count(text) > limit:
        excess = budget.counter.count(text) - limit
        for name in reversed(LEFTOVER_ORDER):
            items = chosen[name]
            while items and excess > 0:
                dropped, _ = items.pop()
                excess -= budget.cost(dropped.split("\x00", 1)[-1]) + 1
            if excess <= 0:
                break
        if not any(chosen.values()):
            # Even the header does not fit a tiny budget: say the least that is true.
            header = f"{digest.count} messages summarized."
            return header if budget.counter.count(header) <= limit else ""
        text = _render(chosen, digest)
    return text
