"""What the background read-ahead reads of each tool output, and when: only what a coming masking takes.

The read-ahead (see :func:`~contextfold.manager._compactor.warm_for_compaction`) has about 37 ns per character to
spend (issue 22: at most 150 ms of CPU per million tokens added); one regex pass alone costs 10-15 ns a character,
entity extraction ~300. Reading every message as it arrives cannot stay under that, so it reads a tool output's
digest material (what its masking placeholder lists, with the digest and placeholder built ahead) only once a
masking can take it soon: once the output has left the results masking keeps (the newest ``keep_tool_io_pairs``
tool results, whatever their size). Until then no masking batch can take it, and the newest outputs of a session
that ends are never masked. It is released one result early: the next turn's result pushes the oldest kept one
out, and the masking of that turn may take it at once. An output no longer than its placeholder with a digest is
never masked (masking would cost tokens), so its material is never read ahead at all. The next held output goes
with those released (:data:`BUILT_TOGETHER`): a placeholder built right after another costs about half of one built
alone on a turn's cold caches, and the turn that would have released it alone builds none. The fold of the view's
superseded reads (what orders a masking) is taken on in the turns that release outputs too, not in the others: a
masking takes released outputs, and a masking turn in between reads the pair or two added since itself.

An output held back is read by a later read-ahead, or by its masking itself if one comes first (the same reading,
on the agent's thread): what is read never changes, only when. The rest is read as before, from half the soft
threshold on: the secrets of every message (any masking or summary must know them all before it writes: ``add()``
redacts what it adds from then on, the read-ahead what came before), the summary readings and the transcript
lines. (Holding those back until a summary is within reach was tried: 2 of the 6 compactions of the lm32b loop at
16K then read cold, ~10-20 ms more each.)
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..messages import Message

__all__ = ["BUILT_TOGETHER", "DIGEST_ITEMS_SCANNED_TOGETHER", "HeldOutputs", "ScanningInBulk", "run_parts"]

# The items a placeholder built ahead asks the secrets about are cleared in bulk this many at a time: a digest of the
# default 40 tokens asks about ~6 items (at most 16 in the lm32b loop at 16K; 80% of them 8 or fewer), so most
# digests take one bulk clearing (16 at a time cleared 10,253 words for 6,175 asks, 8 clears 7,864 in 1,140 calls).
DIGEST_ITEMS_SCANNED_TOGETHER = 8


# A read-ahead that builds placeholders builds the outputs of this many results at once: those a masking may take
# by the next turn, and the next ones to be released (built a turn or so early; the turns in between build none). A
# placeholder built alone in a turn's job costs about twice one built after another in the lm32b loop at 16K (the
# encoder, the scanner's and the extractor's code and tables are cold after the agent's turn, issue 22); built
# early, an output the session ends before masking is built for nothing (at most BUILT_TOGETHER - 1 a session).
BUILT_TOGETHER = 2


def run_parts(parts: Sequence[tuple[Callable[..., Any], tuple[Any, ...]]]) -> None:
    """Run the read-ahead's parts in turn: one job of the background thread for a turn, not one per part.

    Each part is best effort on its own, as each was a job of its own (one that fails does not keep the next from
    running). One job waits once for the agent's call to return, and is counted once (issue 22: the call parsing
    and the whole outputs' secrets were jobs of their own, +1,390 jobs in the lm32b loop).
    """
    for job, args in parts:
        try:
            job(*args)
        except Exception:  # (best effort, as contextfold._background runs a job; no context manager per part)
            continue


class HeldOutputs:
    """Tool outputs whose digest material the read-ahead has not read yet, oldest first, with their calls' arguments.

    The arguments (what stays in view beside a placeholder, left out of its digest) are taken from the read-ahead
    batch the output arrived in, as the digest built ahead always took them.
    """

    def __init__(self) -> None:
        self._held: list[tuple[int, Message, str]] = []  # (the output's number among all tool results, it, arguments)
        self._results = 0  # tool results seen (masking keeps the newest of all results, whatever their size)
        self._placeholder_tokens: dict[str | None, int] = {}  # a placeholder's tokens depend on the name only

    def __len__(self) -> int:
        return len(self._held)

    def release(self, batch: Sequence[Message], keep: int, count: Callable[[Message], int],
                digest_tokens: int) -> list[tuple[Message, str]]:
        """Hold the maskable outputs of ``batch``; return (oldest first) those a masking may take by the next turn.

        ``keep``: the newest tool results masking never takes (``policy.keep_tool_io_pairs``); the held outputs
        among the newest ``keep - 1`` results stay held, the others are released (with the next
        ``BUILT_TOGETHER - 1`` held ones when any is). ``count``: a message's tokens (the
        view's counter); an output of at most its placeholder's tokens plus ``digest_tokens`` is never masked, and
        never held.
        """
        arguments = {c.id: c.arguments for m in batch for c in m.tool_calls}
        shapes = self._placeholder_tokens
        for m in batch:
            if m.role != "tool":
                continue
            self._results += 1
            if m.protected or not isinstance(m.content, str):
                continue
            shape = shapes.get(m.name)
            if shape is None:
                # (imported here, once per tool name: a masking turn's hand-over finds its names' shapes counted)
                from ..cache.masking import _PLACEHOLDER_SHAPE  # the placeholder every masking writes, digest aside

                shape = shapes[m.name] = count(m.with_content(_PLACEHOLDER_SHAPE))
            if count(m) > shape + digest_tokens:  # (as masking's eligibility: cache/masking._eligible)
                self._held.append((self._results, m, arguments.get(m.tool_call_id or "", "")))
        newest_kept = self._results - max(0, keep - 1)  # results numbered above this stay held
        cut = 0
        while cut < len(self._held) and self._held[cut][0] <= newest_kept:
            cut += 1
        if cut:
            # The next held outputs to be released go with these (see BUILT_TOGETHER): the turns that would have
            # released them alone release nothing, and build nothing.
            cut = min(len(self._held), cut + BUILT_TOGETHER - 1)
        ready = [(m, known) for _, m, known in self._held[:cut]]
        del self._held[:cut]
        return ready


class ScanningInBulk:
    """The session's redactor as a placeholder built ahead asks it: each item cleared in bulk with the next ones.

    A digest asks :meth:`mentions_secret` of its candidates in order (those its call's arguments ``known`` name are
    left out unasked), until its budget is spent. The first ask, and each ask past what the bulk so far took, has
    the redactor clear the next :data:`DIGEST_ITEMS_SCANNED_TOGETHER` candidates at once (``Redactor.clean_words``:
    one prefilter pass, nothing remembered touching them): a cleared item is answered "no" while the secrets' state
    is the one it was cleared at, any other is asked of the redactor (which scans it), so the answers, and the
    digest, are the redactor's own. It replaces a walk of the digest made only to collect the items to scan first
    (issue 22: ~5% of the read-ahead), then a scan and an answer asked per item (~18 us each).
    """

    def __init__(self, redactor: Any, items: Sequence[str], known: str) -> None:
        self._redactor = redactor
        self._items = items
        self._known = known
        self._next = 0  # the first candidate no bulk clearing took yet
        self._covered = 0  # asks the bulk clearings took ahead and that have not come yet
        self._clean: Collection[str] = ()  # (what the last clearing cleared, and the state it holds at)
        self._clean_at: Hashable = None

    def mentions_secret(self, text: str) -> bool:
        """The redactor's answer for ``text``, the next candidates cleared first when the clearings so far end here."""
        redactor = self._redactor
        if self._covered == 0:
            items, known, at = self._items, self._known, self._next
            chunk: list[str] = []
            while at < len(items) and len(chunk) < DIGEST_ITEMS_SCANNED_TOGETHER:
                if not (known and items[at] in known):  # (as output_digest leaves them out, before asking)
                    chunk.append(items[at])
                at += 1
            self._next = at
            self._covered = len(chunk)
            clean_words = getattr(redactor, "clean_words", None)
            if clean_words is not None:
                self._clean_at = redactor.digest_state()
                self._clean = clean_words(chunk)
            else:
                redactor.scan_words(chunk)
        if self._covered:
            self._covered -= 1
        if text in self._clean and redactor.digest_state() == self._clean_at:
            return False
        return bool(redactor.mentions_secret(text))

    def blank(self, text: str) -> str:
        return str(self._redactor.blank(text))

    def safe_cut(self, text: str, at: int, *, keep_head: bool = True) -> int:
        return int(self._redactor.safe_cut(text, at, keep_head=keep_head))

    def learn_text(self, text: str) -> None:
        self._redactor.learn_text(text)

    def digest_state(self) -> Hashable:
        state: Hashable = self._redactor.digest_state()
        return state

    def holds_since(self, state: Hashable, text: str, asked: Iterable[str]) -> bool:
        return bool(self._redactor.holds_since(state, text, asked))
