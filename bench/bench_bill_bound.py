"""The least bill a clairvoyant view policy could pay at a given recall (issue 25): a bound, and what reaches it.

contextfold's bill is measured against the unmanaged history's (``bench_bill.py``). Whether the issue's bars
(Anthropic <= 0.80x, OpenAI <= 0.60x) can be met at the table's recall is a question about every possible policy,
not about contextfold's knobs. This bench answers it for a precisely defined family of views, with an oracle that
knows the whole session, by dynamic programming.

**The family ("kept suffix, masked outputs").** At each model call (each recorded assistant message ``i``; the view
is built from ``messages[:i]``) the view is

    pinned head (leading system/developer messages) + messages[c:i], where the tool outputs at indices <= k are
    replaced by a placeholder of ``--placeholder`` tokens (no facts)

for a start ``c`` (a non-tool message: a view never opens on an orphan tool result) and a masking point ``k`` (a
tool index, or none). Outputs no longer than the placeholder are never masked (masking them would save nothing and
lose their facts): only the larger ones are maskable, and ``k`` is one of them. The view must contain the previous
recorded answer and everything after it (``c`` and ``k`` not past it: the agent sees its latest step and every new
output unmasked), and fit the window less the reply reserve contextfold uses (14,500 of 16K; 3,200 of 4K); when no
view does (one message over the window), the smallest allowed view is taken. Nothing dropped or masked comes back:
``c`` never decreases, nor ``k`` while ``c`` stays. A view that keeps ``(c, k)`` only appends (the whole previous
request is a cached prefix); a change is a rewrite. This contains sliding windows, observation masking and every mix
of the two chosen with foresight, per call. It does NOT contain summaries or digests (a fact only counts where its
original message is shown whole) unless the options below add them, nor keeping an old message while dropping a
newer one, or showing a masked output again.

**With summaries (``--summaries``).** The family widens to views that replace what they drop by a summary of it:

    pinned head + S_z(c) + messages[c:i] (outputs at indices <= k masked as above)

where ``S_z(c)`` is what contextfold's extractive summarizer writes of ``messages[head:c]`` (all that was dropped,
summarized afresh, not folded from earlier summaries: more generous than a rolling summary), sent as contextfold
sends one (a header line with the text, the retained facts as a second message) and counted with them. Its budget
is the one a compaction gives a summary at this window (the reserve: half of what the pinned head leaves, at most
``summary_max_tokens``; at most half of the tokens it replaces; at least ``MIN_SUMMARY_TOKENS``) times a level of
``SUMMARY_LEVELS`` (``z``: 1 the full budget, 2 a quarter of it; 0 no summary, the family above). A fact counts as
found when the summary holds it (whole word, as anywhere else). The summary sits right after the pinned head, so a
change of ``c`` (or of the level) rewrites everything after the head; a view that keeps ``(c, k, z)`` appends, and
one that only masks more keeps the summary in its cached prefix. A summary, once there, stays as it is or goes
(it never comes back for the same ``c``). Placing later summaries after the earlier ones (so that those stay cached)
is outside the family; DESIGN sizes it (at most ~0.03 of tau-bench's Anthropic bill).

**Wider still** (each one an option; ``--widest`` takes them all, with ``--digest-tokens 64``): what a demanding
reader would name as cheaper than the family above, each modelled at least as generously as a policy could use it.

- ``--placeholder N``: a shorter placeholder (0: a masked output costs nothing at all, an upper bound on any).
- ``--digest-tokens D``: a masked output keeps what contextfold's digest of it holds at ``D`` tokens (the call's
  arguments left out, as contextfold does), at the ``--placeholder``'s size: with ``--placeholder`` below
  ``D`` plus the placeholder's frame, more generous than any real digest.
- ``--stacked`` (with ``--summaries``): append-only compaction. A new summary (of a later start, at any level, at
  least as long) may extend the previous one, which stays in the cached prefix: the rewrite is priced from the
  pinned head plus the previous summary, while the view's summary has the fresh summary's size and facts (generous:
  a real extension has both summaries' sizes, or a rolling summary's fewer facts).
- ``--reserve reply``: a view may fill the window less the reply the call actually got (known with foresight),
  instead of contextfold's reply reserve.

Masking merged into a summary's rewrite is in the family already: a view that drops (or summarizes) and masks more
in the same call is one rewrite, from the pinned head. Still outside it: keeping an old message while dropping a
newer one (dropping the middle, or masking a later output and not an earlier one; the bound over every policy covers
those), showing a masked output again, rewriting the system prompt (not a context manager's to change).

**The recall** is the project's metric (``replay.harness``): the facts a recorded answer uses
(``metrics.turn_entities``) that occurred in an earlier message, found as whole words (``contains_fact``) in the
view; here a fact is in the view when the head or a shown (not masked) message holds it. Needed facts do not
depend on the policy, so recall here and in ``bench_bill.py`` share a denominator.

**The cost model in the DP**, per call, with ``P`` the tokens the request shares with the previous request as a
prefix and ``V`` its tokens (units of one fresh input token, as ``contextfold.billing``):

- OpenAI (gpt-4o): ``P`` is read at 0.5 (from 1,024 tokens, in steps of 128), the rest fresh at 1.
- Anthropic (Claude Sonnet 4, 5-minute writes): ``P`` read at 0.1 (from 1,024 tokens), the rest written at 1.25
  (fresh at 1 in a session's last call; a request under 1,024 tokens is all fresh). This is optimistic for the
  oracle: an entry is assumed at every prefix the previous request had (the real client marks at most four, and a
  lookup walks back 20 blocks), and a client is assumed to mark the last block of each request (as contextfold's
  and Anthropic's guidance do), so the premium is paid on new tokens even before a rewrite the oracle foresees.
- Calls are 30 s apart (as the replay): nothing expires. Since nothing comes back, no earlier request shares a
  longer prefix with a view than the one just before it, so pricing that prefix alone is exact.

**The bound.** For a price ``lam`` per fact found, the DP finds, per session exactly over the family and cost
model above, the views minimizing ``bill - lam * facts found``: ``g(lam)``. For any policy of the family with
``F`` facts found, ``bill >= g(lam) + lam * F`` for every ``lam``, so ``max over lam of (sum of g) + lam * F`` is
a lower bound on the family's bill at that recall (the Lagrangian dual; the bound is exact at the frontier's
convex corners). Each ``lam``'s views are also billed with the replay's own cache simulation
(``PromptCache``, the unmanaged history's two marks) and checked for recall on the joined text: those are
achievable points of the family (with foresight), printed beside the bound.

**The bound over every policy** (summaries, digests, any rewriting) assumes only that each request sends the pinned
head (system prompt; the task too unless ``--drop-task``) and the previous answer with everything after it (the
tool results must follow the calls they answer, and the agent must see its latest step), whole or cut at write time
as ``--outputs`` says: the head is read
at the read price after the first call (whatever its size), all the rest at the fresh price (below Anthropic's
write price), and each needed fact the request does not hold in those messages costs at least its own tokens at the
read price (a summary can carry nothing for less), the cheapest facts first. It is far below the family's bound:
the gap is what an ideal summary, knowing which facts the future needs and holding nothing else, could save.

**Rules without foresight** are billed the same way for comparison: the last N answered outputs shown, older ones
masked (the masking moves one output per call), the oldest messages dropped only to fit.

**Outputs** (``--outputs``): a policy may send a large new output whole or cut at write time, as contextfold does
(head, tail and a ref; the cut part's facts are not in the view). ``recorded`` shows every message as recorded,
``cut`` as contextfold keeps it at the window before any masking; the default, ``relaxed``, gives each message the
tokens of its cut form and the facts of its recorded form, so its bound holds for every mix of the two (its
re-billed points are then not views anyone could send, and its recall re-check counts the recorded text).

The task (the first user message, when it follows the system prompt) is pinned with the head by default: without
it the oracle drops it whenever no fact of it is needed next, which no agent would survive (``--drop-task`` lets it).
lm32b is left out by default (its bars are met, and the DP takes ~20 min there).

    PYTHONPATH=src python bench/bench_bill_bound.py [--sources claude,tau] [--providers openai,anthropic]
        [--placeholder 16] [--digest-tokens 0] [--drop-task] [--outputs relaxed|cut|recorded] [--summaries [--stacked]]
        [--reserve policy|reply] [--widest] [--lambdas L1,L2,...] [--no-rules]
"""

from __future__ import annotations

import argparse
import bisect
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from contextfold.billing import Block, PromptCache, SessionMeter, blocks_of, cache_rates
from contextfold.cache._digest import output_digest
from contextfold.compaction import Policy
from contextfold.compaction._fit import MIN_SUMMARY_TOKENS
from contextfold.importers._files import load_sessions
from contextfold.importers._session import RecordedSession
from contextfold.manager import ContextManager
from contextfold.messages import Message
from contextfold.replay.metrics import contains_fact, message_search_text, turn_entities
from contextfold.summarize import ExtractiveSummarizer, SummaryRequest
from contextfold.tokens import MessageCounter, TiktokenCounter

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "trajectories"
SOURCES = {
    "lm32b": ("sweagent-lm32b", 16_000),
    "claude": ("sweagent-claude4sonnet", 16_000),
    "tau": ("taubench-airline/gpt-4o-airline.json", 4_000),
}
# The table (recall of the project's metric a policy must not fall below) and bars.
TABLE_RECALL = {"lm32b": 0.972, "claude": 0.992, "tau": 0.934}
BARS = {"openai": 0.60, "anthropic": 0.80}
MODELS = {"openai": "gpt-4o", "anthropic": "claude-sonnet-4"}
INTERVAL_S = 30.0
# Prices of one fact found, units of one fresh input token: 0 (bill alone) up to "keep everything that fits".
LAMBDAS = (0.0, *(round(10 ** (e / 6), 3) for e in range(-6, 31)))
NONE = -1  # no output masked
OUTPUTS = {"recorded": "as recorded", "cut": "cut at write time as contextfold does",
           "relaxed": "relaxed (tokens of the write-time cut, facts of the recording)"}
# (in the head, last message never masked holding it, last maskable output holding it, last maskable output whose
# digest holds it (--digest-tokens; -1 otherwise))
Fact = tuple[bool, int, int, int]
State = tuple[int, int, int]  # (c, k, z): z = 0 no summary, else the level of the summary of messages[head:c]
# --summaries: the summary of what was dropped at each level, as a share of the budget contextfold's compaction gives
# a summary (its reserve, at most half of what the summary replaces).
SUMMARY_LEVELS = (1.0, 0.25)


@dataclass(slots=True)
class SessionModel:
    """One recorded session as the DP sees it (tokens per message, calls, facts each call needs)."""

    head: int
    n_head: int
    shown: list[int]  # tokens of each message shown whole
    masked: list[int]  # tokens of each message when masked (tool outputs), else shown
    tool: list[bool]
    maskable: list[bool]  # tool outputs larger than their placeholder (masking a smaller one saves nothing)
    calls: list[int]  # index of each recorded answer
    facts: list[list[Fact]]  # per call
    fact_tokens: list[list[int]]  # per call, per fact: its own tokens
    keys: list[str]
    texts: list[str]  # what a fact is found in, per message shown whole
    limit: int
    limits: list[int]  # per call: the most tokens its view may have (--reserve)
    digest_texts: list[str] = field(default_factory=list)  # --digest-tokens: what each masked output keeps
    # --summaries: per level (index z - 1), per start c, the summary's tokens and text (empty where none)
    summary_tokens: list[list[int]] = field(default_factory=list)
    summary_texts: list[list[str]] = field(default_factory=list)
    # per call, per (c, z) with a summary: which of the call's facts the summary holds
    held: list[dict[tuple[int, int], tuple[bool, ...]]] = field(default_factory=list)

    def summary(self, c: int, z: int) -> int:
        return self.summary_tokens[z - 1][c] if z else 0

    def prefix(self) -> tuple[list[int], list[int]]:
        whole, saved = [0], [0]
        for i, w in enumerate(self.shown):
            whole.append(whole[-1] + w)
            saved.append(saved[-1] + (w - self.masked[i] if self.maskable[i] else 0))
        return whole, saved


def write_time_views(session: RecordedSession, window: int) -> list[Message]:
    """The session's messages as contextfold keeps them at ``window`` before any masking or compaction (large tool
    outputs cut at write time, the rest as recorded): one per recorded message."""
    manager = ContextManager("gpt-4o", max_context_tokens=window, policy={"enabled": False}, store="memory",
                             archive=None)
    manager.add(list(session.messages))
    views = manager.messages()
    if len(views) != len(session.messages):
        raise RuntimeError(f"{session.id}: {len(views)} kept messages for {len(session.messages)} recorded")
    return views


def model_session(session: RecordedSession, counter: MessageCounter, window: int, placeholder: int,
                  pin_task: bool, outputs: str, summaries: bool = False, digest_tokens: int = 0,
                  reserve: str = "policy") -> SessionModel:
    messages = session.messages
    shown_as = write_time_views(session, window) if outputs != "recorded" else messages
    read_as = shown_as if outputs == "cut" else messages  # "relaxed": cut outputs' tokens, recorded outputs' facts
    n_head = 0
    while n_head < len(messages) and messages[n_head].role in ("system", "developer"):
        n_head += 1
    if pin_task and n_head < len(messages) and messages[n_head].role == "user":
        n_head += 1  # the task: always shown, as part of the pinned head
    shown = [counter.count_message(m) for m in shown_as]
    tool = [m.role == "tool" for m in messages]
    maskable = [t and w > placeholder for w, t in zip(shown, tool, strict=True)]
    masked = [min(w, placeholder) if t else w for w, t in zip(shown, maskable, strict=True)]
    texts = [message_search_text(m) for m in read_as]
    digests = output_digests(read_as, maskable, texts, counter, digest_tokens)
    head_text = "\n".join(texts[:n_head])
    calls, facts, fact_tokens = [], [], []
    seen: set[str] = set()
    added = 0
    for i, m in enumerate(messages):
        if m.role != "assistant" or not i:
            continue
        for j in range(added, i):
            seen.update(turn_entities(messages[j]))
        added = i
        needed = sorted(e for e in turn_entities(m) if e in seen)
        row: list[Fact] = []
        for e in needed:
            last_plain = last_tool = last_digest = -1
            for j in range(i - 1, n_head - 1, -1):
                if maskable[j] and last_tool < 0 and contains_fact(texts[j], e):
                    last_tool = j
                elif not maskable[j] and last_plain < 0 and contains_fact(texts[j], e):
                    last_plain = j
                if maskable[j] and last_digest < 0 and digests[j] and contains_fact(digests[j], e):
                    last_digest = j
                if last_tool >= 0 and last_plain >= 0 and (last_digest >= 0 or not digest_tokens):
                    break
            row.append((contains_fact(head_text, e), last_plain, last_tool, last_digest))
        calls.append(i)
        facts.append(row)
        fact_tokens.append([counter.counter.count(e) for e in needed])
    budgets = Policy().budgets(window)
    limit = window - budgets.reply_reserve
    # --reserve reply: each view need only leave room for the reply the call actually got (known with foresight)
    limits = [window - shown[i] if reserve == "reply" else limit for i in calls]
    model = SessionModel(sum(shown[:n_head]), n_head, shown, masked, tool, maskable, calls, facts, fact_tokens,
                         [m.fingerprint() for m in shown_as], texts, limit, limits, digests)
    if summaries:
        add_summaries(model, read_as, counter, [sorted(e for e in turn_entities(messages[i]) if e in row_seen)
                                                for i, row_seen in zip(calls, _seen_at(messages, calls), strict=True)])
    return model


def output_digests(read_as: Sequence[Message], maskable: Sequence[bool], texts: Sequence[str],
                   counter: MessageCounter, budget: int) -> list[str]:
    """--digest-tokens: what each maskable output's placeholder keeps of it, contextfold's digest at ``budget``
    tokens (leaving out what the call's arguments, in the assistant message before, already say)."""
    out = [""] * len(read_as)
    if budget <= 0:
        return out
    known = ""
    for j, m in enumerate(read_as):
        if m.role == "assistant":
            known = texts[j]
        elif maskable[j]:
            out[j] = output_digest(m.text, budget_tokens=budget, counter=counter.counter, known=known)
    return out


def _seen_at(messages: Sequence[Message], calls: Sequence[int]) -> list[set[str]]:
    """The entities seen before each call (what ``model_session`` computes on its way)."""
    out: list[set[str]] = []
    seen: set[str] = set()
    added = 0
    for i in calls:
        for j in range(added, i):
            seen.update(turn_entities(messages[j]))
        added = i
        out.append(set(seen))
    return out


def add_summaries(s: SessionModel, read_as: Sequence[Message], counter: MessageCounter,
                  needed: Sequence[Sequence[str]]) -> None:
    """The summary of ``messages[head:c]`` for every start ``c`` a view may have, at each of ``SUMMARY_LEVELS``.

    Each is what contextfold's extractive summarizer writes of those messages (as read: recorded in the relaxed and
    recorded modes) within its budget: the reserve a compaction gives a summary at this window (half of what the
    pinned head leaves, at most ``summary_max_tokens``), at most half of the tokens it replaces, at least
    ``MIN_SUMMARY_TOKENS``; times the level. It is sent as contextfold sends one (a header line, then the text; the
    retained facts as a second message), and counted with it.
    """
    policy = Policy()
    summarizer = ExtractiveSummarizer(counter=counter.counter)
    reserve = min(policy.summary_max_tokens, max(0, s.limit - s.head) // 2)
    whole, _ = s.prefix()
    n = len(s.shown)
    s.summary_tokens = [[0] * n for _ in SUMMARY_LEVELS]
    s.summary_texts = [[""] * n for _ in SUMMARY_LEVELS]
    last = s.calls[-1] if s.calls else s.n_head
    starts = [c for c in range(s.n_head + 1, last + 1) if not s.tool[c]]
    for level, share in enumerate(SUMMARY_LEVELS):
        for c in starts:
            replaced = whole[c] - whole[s.n_head]
            budget = max(MIN_SUMMARY_TOKENS, int(min(reserve, max(MIN_SUMMARY_TOKENS, replaced // 2)) * share))
            result = summarizer.summarize(SummaryRequest(tuple(read_as[s.n_head:c]), max_tokens=budget))
            sent = [Message.user(f"[contextfold summary v1 — {c - s.n_head} earlier messages compacted]\n"
                                 f"{result.summary}")]
            if result.retain:
                sent.append(Message.user("\n".join(f"- {fact}" for fact in result.retain)))
            s.summary_tokens[level][c] = sum(counter.count_message(m) for m in sent)
            s.summary_texts[level][c] = "\n".join(m.text for m in sent)
    memo: dict[tuple[int, int, str], bool] = {}
    for t, i in enumerate(s.calls):
        row: dict[tuple[int, int], tuple[bool, ...]] = {}
        for c in starts:
            if c > i:
                break
            for z in range(1, len(SUMMARY_LEVELS) + 1):
                held = []
                for e in needed[t]:
                    key = (c, z, e)
                    if key not in memo:
                        memo[key] = contains_fact(s.summary_texts[z - 1][c], e)
                    held.append(memo[key])
                row[(c, z)] = tuple(held)
        s.held.append(row)


def found(row: Sequence[Fact], c: int, k: int, held: Sequence[bool] | None = None) -> int:
    if held is None:
        return sum(1 for in_head, plain, out, dig in row
                   if in_head or plain >= c or (out >= c and out > k) or dig >= c)
    return sum(1 for (in_head, plain, out, dig), h in zip(row, held, strict=True)
               if h or in_head or plain >= c or (out >= c and out > k) or dig >= c)


def found_at(s: SessionModel, t: int, state: State) -> int:
    c, k, z = state
    return found(s.facts[t], c, k, s.held[t].get((c, z)) if z else None)


class Prices:
    """A provider's cost model for the DP (see the module docstring)."""

    def __init__(self, provider: str) -> None:
        self.provider = provider

    def cost(self, shared: int, tokens: int, last: bool) -> float:
        if self.provider == "openai":
            read = 0 if shared < 1024 else 1024 + (shared - 1024) // 128 * 128
            return 0.5 * read + (tokens - read)
        if tokens < 1024:
            return float(tokens)
        read = shared if shared >= 1024 else 0
        return 0.1 * read + (1.0 if last else 1.25) * (tokens - read)


def solve(s: SessionModel, prices: Prices, lam: float, stacked: bool = False) -> tuple[float, int, list[State]]:
    """The views minimizing bill - lam * facts found: (modelled bill, facts found, the (c, k, z) of each call).

    ``stacked`` (--stacked): a new summary may extend the previous one (see the module docstring).
    """
    whole, saved = s.prefix()
    tools = [j for j, t in enumerate(s.maskable) if t]
    levels = range(len(s.summary_tokens) + 1)

    def tokens(i: int, c: int, k: int, z: int = 0) -> int:
        return s.head + s.summary(c, z) + whole[i] - whole[c] - (saved[k + 1] - saved[c] if k >= c else 0)

    def first_tool_after(j: int) -> int:
        for t in tools:
            if t > j:
                return t
        return len(s.shown)

    previous: dict[State, float] = {}
    prev_bill: dict[State, float] = {}
    previous_ks: dict[int, list[tuple[int, int]]] = {}
    back: list[dict[State, State | None]] = []
    for t, i in enumerate(s.calls):
        last = t == len(s.calls) - 1
        reach = s.calls[t - 1] if t else max((j for j in range(s.n_head, i) if not s.tool[j]), default=i)
        starts = [c for c in range(s.n_head, reach + 1) if not s.tool[c]]
        states = [(c, k, z) for c in starts for k in (NONE, *(j for j in tools if c < j < reach))
                  for z in (levels if c > s.n_head else (0,))]
        sizes = {st: tokens(i, *st) for st in states}
        fits = [st for st in states if sizes[st] <= s.limits[t]]
        if not fits:
            least = min(sizes.values())
            fits = [st for st in states if sizes[st] == least]
        current: dict[State, float] = {}
        cur_bill: dict[State, float] = {}
        links: dict[State, State | None] = {}
        # Nothing dropped or masked comes back (c and, at the same c, k never decrease; a summary, once there, stays
        # as it is or goes): then the previous request shares the longest prefix with this one of all earlier
        # requests, and pricing that prefix alone is exact.
        by_start: list[tuple[int, float, State]] = []  # (c, least value of any state with a start <= c, that state)
        for st_prev in sorted(previous):
            value = previous[st_prev]
            if not by_start or value < by_start[-1][1]:
                by_start.append((st_prev[0], value, st_prev))
            else:
                by_start.append((st_prev[0], by_start[-1][1], by_start[-1][2]))
        extends = _extensions(s, prices, previous, fits, last) if stacked and previous else {}
        for st in fits:
            c, k, z = st
            v = sizes[st]
            options: list[tuple[float, State | None]] = []
            if not previous:
                options.append((prices.cost(0, v, last), None))
            else:
                earlier = bisect.bisect_left(by_start, (c,)) - 1  # the best state with a start before c
                if earlier >= 0:
                    options.append((prices.cost(s.head, v, last), by_start[earlier][2]))
                if (c, z) in extends:
                    shared, link_state = extends[(c, z)]
                    options.append((prices.cost(shared, v, last), link_state))
                for pk, pz in previous_ks.get(c, ()):
                    if pk > k or (pz != z and z):
                        continue  # a masked output or a summary does not come back
                    if pz != z:
                        shared = s.head  # the summary went: rewritten from the pinned head on
                    elif pk == k:
                        shared = tokens(s.calls[t - 1], c, k, z)
                    else:
                        d = first_tool_after(c - 1 if pk == NONE else pk)
                        shared = (s.head + s.summary(c, z) + whole[d] - whole[c]
                                  - (saved[pk + 1] - saved[c] if pk >= c else 0))
                    options.append((prices.cost(shared, v, last), (c, pk, pz)))
            if not options:
                continue
            step, link = min(options, key=lambda o: o[0] + (previous[o[1]] if o[1] is not None else 0.0))
            base = previous[link] if link is not None else 0.0
            base_bill = prev_bill[link] if link is not None else 0.0
            current[st] = base + step - lam * found_at(s, t, st)
            cur_bill[st] = base_bill + step
            links[st] = link
        assert current, "no view of the family follows the previous ones"
        back.append(links)
        previous, prev_bill = current, cur_bill
        previous_ks = {}
        for c, k, z in previous:
            previous_ks.setdefault(c, []).append((k, z))
    end = min(previous, key=previous.__getitem__)
    path: list[State] = [end]
    for links in reversed(back[1:]):
        prior = links[path[-1]]
        assert prior is not None
        path.append(prior)
    path.reverse()
    facts = sum(found_at(s, t, st) for t, st in enumerate(path))
    return prev_bill[end], facts, path


def _extensions(s: SessionModel, prices: Prices, previous: dict[State, float], fits: Sequence[State],
                last: bool) -> dict[tuple[int, int], tuple[int, State]]:
    """--stacked: per (start, level) of this call's views with a summary, the best previous view with a summary of an
    earlier start and no longer, and the prefix the two share (the pinned head and that previous summary).

    A view's price is affine in its size with a slope that does not depend on the shared prefix (from 1,024 tokens),
    so the best link of every view of a (start, level) is the same: found once per pair, priced at a large size.
    """
    best: dict[tuple[int, int], tuple[float, State]] = {}
    for st, value in previous.items():
        key = (st[0], st[2])
        if st[2] and (key not in best or value < best[key][0]):
            best[key] = (value, st)
    out: dict[tuple[int, int], tuple[int, State]] = {}
    for c, z in {(c, z) for c, _k, z in fits if z}:
        options = []
        for (pc, pz), (value, st) in best.items():
            if pc < c and s.summary(pc, pz) <= s.summary(c, z):  # an extension is at least as long as what it extends
                shared = s.head + s.summary(pc, pz)
                options.append((value + prices.cost(shared, 1 << 30, last), shared, st))
        if options:
            _v, shared, st = min(options, key=lambda o: o[0])
            out[(c, z)] = (shared, st)
    return out


def universal(models: Sequence[SessionModel], provider: str, recall: float) -> float:
    """A bound on every policy, summaries included (units): see "the universal bound" in the module docstring."""
    read = 0.5 if provider == "openai" else 0.1
    units = 0.0
    carried: list[float] = []  # what each fact outside the mandatory content costs at least
    needed = 0
    inside = 0
    for s in models:
        whole, _ = s.prefix()
        for t, i in enumerate(s.calls):
            reach = s.calls[t - 1] if t else s.n_head
            head_read = read if t else 1.0  # (the 1,024-token minimum is left out: a bound)
            units += head_read * s.head + 1.0 * (whole[i] - whole[reach])
            for (in_head, plain, out, _dig), tokens in zip(s.facts[t], s.fact_tokens[t], strict=True):
                needed += 1
                if in_head or plain >= reach or out >= reach:
                    inside += 1
                else:
                    carried.append(read * tokens)
    short = max(0, math.ceil(recall * needed) - inside)
    if short > len(carried):
        return math.inf
    return units + sum(sorted(carried)[:short])


def _views(session: RecordedSession, s: SessionModel, path: Sequence[State],
           stacked: bool = False) -> list[tuple[list[Block], str]]:
    """The request of each call of ``path``: its blocks and the text its facts are found in.

    ``stacked``: a summary at least as long as the previous view's (of an earlier start) is sent as that summary's
    blocks and one block with the rest, so the two requests share them.
    """
    out = []
    chain: list[Block] = []
    before: State | None = None
    for i, (c, k, z) in zip(s.calls, path, strict=True):
        blocks = [Block(s.keys[j], s.shown[j], pinned=True) for j in range(s.n_head)]
        texts = s.texts[: s.n_head]
        if z:
            size = s.summary(c, z)
            if before is not None and (before[0], before[2]) == (c, z):
                pass  # the same summary
            elif stacked and before is not None and before[2] and before[0] < c and chain and \
                    size >= sum(b.tokens for b in chain):
                chain = [*chain, Block(f"summary+:{z}:{c}", size - sum(b.tokens for b in chain))]
            else:
                chain = [Block(f"summary:{z}:{c}", size)]
            blocks.extend(chain)
            texts.append(s.summary_texts[z - 1][c])
        else:
            chain = []
        before = (c, k, z)
        for j in range(c, i):
            if s.maskable[j] and j <= k:
                blocks.append(Block(f"masked:{s.keys[j]}", s.masked[j]))
                if s.digest_texts and s.digest_texts[j]:
                    texts.append(s.digest_texts[j])
            else:
                blocks.append(Block(s.keys[j], s.shown[j]))
                texts.append(s.texts[j])
        out.append((blocks, "\n".join(texts)))
    return out


def _common(a: Sequence[Block], b: Sequence[Block]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x.key != y.key:
            break
        n += 1
    return n


def rebill(session: RecordedSession, s: SessionModel, path: Sequence[State], provider: str,
           stacked: bool = False) -> tuple[float, int]:
    """The views of ``path`` billed by the replay's cache simulation, and their facts found on the joined text.

    At Anthropic's rates each request carries the four marks a client with the oracle's foresight would put: after
    the pinned head, at the end of the prefix it shares with the previous request (so the lookup finds that entry
    without walking back), at the end of the prefix it will share with the next request (so that entry exists),
    and on its last block.
    """
    rates = cache_rates(MODELS[provider])
    marked = rates.scheme == "breakpoints"
    cache = PromptCache(rates, breakpoints="marked" if marked else "pinned_and_last")
    views = _views(session, s, path, stacked)
    units = 0.0
    facts = 0
    seen: set[str] = set()
    added = 0
    for t, (i, (blocks, text)) in enumerate(zip(s.calls, views, strict=True)):
        if marked:
            marks = {s.n_head - 1, len(blocks) - 1}
            if t:
                marks.add(_common(views[t - 1][0], blocks) - 1)
            if t + 1 < len(views):
                marks.add(_common(blocks, views[t + 1][0]) - 1)
            blocks = [Block(b.key, b.tokens, b.parts, b.pinned, n in marks) for n, b in enumerate(blocks)]
        units += cache.bill(blocks, at=t * INTERVAL_S).units
        messages = session.messages
        for j in range(added, i):
            seen.update(turn_entities(messages[j]))
        added = i
        facts += sum(1 for e in turn_entities(messages[i]) if e in seen and contains_fact(text, e))
    return units, facts


def rolling(s: SessionModel, keep: int | None) -> list[State]:
    """A rule without foresight: every tool output but the last ``keep`` answered ones masked from the call after it
    leaves them (None: nothing masked), the oldest messages dropped when the view would not fit (fewest dropped)."""
    whole, saved = s.prefix()
    path: list[State] = []
    c = s.n_head
    for t, i in enumerate(s.calls):
        reach = s.calls[t - 1] if t else max((j for j in range(s.n_head, i) if not s.tool[j]), default=i)
        answered = [j for j in range(s.n_head, reach) if s.tool[j]]
        k = NONE if keep is None or len(answered) <= keep else answered[len(answered) - keep - 1]

        def size(start: int, k: int = k, i: int = i) -> int:
            return s.head + whole[i] - whole[start] - (saved[k + 1] - saved[start] if k >= start else 0)

        starts = [x for x in range(c, reach + 1) if not s.tool[x]] or [reach]
        c = next((x for x in starts if size(x) <= s.limits[t]), starts[-1])
        path.append((c, k if k > c else NONE, 0))
    return path


def unmanaged(sessions: Sequence[RecordedSession], counter: MessageCounter) -> dict[str, float]:
    totals = dict.fromkeys(MODELS, 0.0)
    for session in sessions:
        meter = SessionMeter({p: cache_rates(m) for p, m in MODELS.items()}, INTERVAL_S)
        for i, m in enumerate(session.messages):
            if m.role == "assistant" and i:
                meter.request(blocks_of(session.messages[:i], counter.count_message))
        for p, bill in meter.bills.items():
            totals[p] += bill.units
    return totals


@dataclass(frozen=True, slots=True)
class Family:
    """The views the oracle may choose from (the command line's options; see the module docstring)."""

    placeholder: int = 16
    pin_task: bool = True
    outputs: str = "relaxed"
    summaries: bool = False
    digest_tokens: int = 0
    stacked: bool = False
    reserve: str = "policy"

    def describe(self) -> str:
        parts = [f"placeholder {self.placeholder} tokens",
                 "task pinned" if self.pin_task else "task may be dropped", f"outputs {OUTPUTS[self.outputs]}"]
        if self.digest_tokens:
            parts.append(f"a masked output keeps what its {self.digest_tokens}-token digest holds")
        if self.summaries:
            parts.append("summaries of what is dropped" + (", a new one extending the previous" if self.stacked
                                                            else ""))
        if self.reserve == "reply":
            parts.append("views up to the window less the call's own reply")
        return ", ".join(parts)


def report(name: str, family: Family, providers: Sequence[str] = tuple(MODELS),
           lambdas: Sequence[float] = LAMBDAS, rules: bool = True) -> None:
    path, window = SOURCES[name]
    sessions = load_sessions(DATA / path)
    counter = MessageCounter(TiktokenCounter("o200k_base"))
    started = time.process_time()
    models = [model_session(x, counter, window, family.placeholder, family.pin_task, family.outputs,
                            family.summaries, family.digest_tokens, family.reserve) for x in sessions]
    needed = sum(len(row) for m in models for row in m.facts)
    reference = unmanaged(sessions, counter)
    print(f"\n### {name} @ {window // 1000}K ({len(sessions)} sessions, {needed:,} facts needed, "
          f"{family.describe()})\n")
    for provider in providers:
        prices = Prices(provider)
        dual: list[tuple[float, float]] = []  # (lam, sum of g)
        rows = []
        for lam in lambdas:
            bill = g = 0.0
            facts = exact_facts = 0
            exact = 0.0
            for x, m in zip(sessions, models, strict=True):
                b, f, chosen = solve(m, prices, lam, family.stacked)
                bill += b
                facts += f
                g += b - lam * f
                u, ef = rebill(x, m, chosen, provider, family.stacked)
                exact += u
                exact_facts += ef
            dual.append((lam, g))
            rows.append((lam, facts / needed, bill / reference[provider], exact_facts / needed,
                         exact / reference[provider]))
        print(f"{provider} ({MODELS[provider]}), bar {BARS[provider]}:\n")
        print("| price of a fact (units) | recall (DP) | bill (DP model) | recall (re-checked) | "
              "bill (replay's cache simulation) |\n|---|---|---|---|---|")
        shown_rows = [r for n, r in enumerate(rows) if n == 0 or r[1] != rows[n - 1][1]]
        for lam, rec, b, erec, eb in shown_rows:
            print(f"| {lam:g} | {100 * rec:.2f}% | {b:.3f} | {100 * erec:.2f}% | {eb:.3f} |")
        print()
        best_recall = max(r for _lam, r, _b, _er, _eb in rows)
        for target in sorted({TABLE_RECALL[name], 0.90, 0.95, 0.97, 0.99}):
            if target > best_recall:
                print(f"- recall >= {100 * target:.1f}%: no view of the family reaches it (its best: "
                      f"{100 * best_recall:.2f}%)")
                continue
            bound = max(g + lam * target * needed for lam, g in dual) / reference[provider]
            reach = [eb for _lam, _r, _b, erec, eb in rows if erec >= target]
            best = f"{min(reach):.3f}" if reach else "none of the points"
            print(f"- recall >= {100 * target:.1f}%: bill >= {bound:.4f} (bound over the family; over every policy: "
                  f"{universal(models, provider, target) / reference[provider]:.3f}); cheapest point found at that "
                  f"recall: {best}")
        print()
    if not rules:
        print(f"  {name}: {time.process_time() - started:.0f} s CPU", file=sys.stderr)
        return
    print("Rules without foresight (the last N answered outputs shown, older ones masked, the oldest messages dropped "
          "only to fit; Anthropic billed with the same four marks):\n")
    print("| outputs kept | recall | bill, OpenAI rates | bill, Anthropic rates |\n|---|---|---|---|")
    for keep in (None, 8, 6, 4, 3, 2, 1, 0):
        cells = []
        recall = 0.0
        for provider in MODELS:
            units = 0.0
            facts = 0
            for x, m in zip(sessions, models, strict=True):
                u, f = rebill(x, m, rolling(m, keep), provider)
                units += u
                facts += f
            recall = facts / needed
            cells.append(f"{units / reference[provider]:.3f}")
        print(f"| {'all' if keep is None else keep} | {100 * recall:.2f}% | {' | '.join(cells)} |")
    print(f"  {name}: {time.process_time() - started:.0f} s CPU", file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sources", default="claude,tau")
    parser.add_argument("--providers", default=",".join(MODELS), help="openai, anthropic or both")
    parser.add_argument("--placeholder", type=int, default=16,
                        help="tokens a masked output's placeholder takes (with --digest-tokens 0 it keeps no facts)")
    parser.add_argument("--digest-tokens", type=int, default=0,
                        help="a masked output keeps the facts of contextfold's digest of it at this many tokens, at "
                             "the --placeholder's size (0: no facts)")
    parser.add_argument("--drop-task", action="store_true",
                        help="let the oracle drop the first user message (the task) like any other: by default it is "
                             "pinned with the system prompt, since no agent works without its task")
    parser.add_argument("--outputs", choices=tuple(OUTPUTS), default="relaxed",
                        help="messages as recorded, as contextfold keeps them at write time (large outputs cut), or "
                             "relaxed: a cut output's tokens with the recorded output's facts (a bound over every "
                             "mix of the two; its re-billed points are not views anyone can send)")
    parser.add_argument("--summaries", action="store_true",
                        help="widen the family: what a view drops may be replaced by contextfold's extractive summary "
                             "of it, at each of the levels of SUMMARY_LEVELS (see the module docstring)")
    parser.add_argument("--stacked", action="store_true",
                        help="with --summaries: a new summary may extend the previous one, which stays in the cached "
                             "prefix (append-only compaction; see the module docstring)")
    parser.add_argument("--reserve", choices=("policy", "reply"), default="policy",
                        help="policy: views leave contextfold's reply reserve; reply: only the tokens of the reply the "
                             "call actually got")
    parser.add_argument("--widest", action="store_true",
                        help="every widening at once: --summaries --stacked --reserve reply --digest-tokens 64 "
                             "(with the --placeholder given)")
    parser.add_argument("--lambdas", default="",
                        help="comma-separated prices of a fact to solve for (default: a grid from 0.001 to 10^5); "
                             "any subset still gives a bound, only a weaker one")
    parser.add_argument("--no-rules", action="store_true", help="leave out the rules without foresight")
    args = parser.parse_args()
    if args.placeholder < 0:
        parser.error("--placeholder: must not be negative")
    if args.digest_tokens < 0:
        parser.error("--digest-tokens: must not be negative")
    if args.stacked and not (args.summaries or args.widest):
        parser.error("--stacked: needs --summaries")
    providers = [p for p in args.providers.split(",") if p]
    unknown = [p for p in providers if p not in MODELS]
    if unknown or not providers:
        parser.error(f"--providers: {', '.join(unknown) or 'none'} (known: {', '.join(MODELS)})")
    try:
        lambdas = tuple(float(x) for x in args.lambdas.split(",")) if args.lambdas else LAMBDAS
    except ValueError:
        parser.error(f"--lambdas: not a comma-separated list of numbers: {args.lambdas!r}")
    if args.widest:
        family = Family(args.placeholder, not args.drop_task, args.outputs, True, args.digest_tokens or 64, True,
                        "reply")
    else:
        family = Family(args.placeholder, not args.drop_task, args.outputs, args.summaries, args.digest_tokens,
                        args.stacked, args.reserve)
    for name in args.sources.split(","):
        report(name, family, providers, lambdas, not args.no_rules)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
