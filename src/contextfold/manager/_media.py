"""The media limits a manager keeps its view within, and the view's media counted incrementally.

The limits in force are the provider's published ones (:func:`contextfold.media.known_limits`), lowered by what its
errors taught (:meth:`MediaGuard.learn`, from overflow recovery). Counting the view's media must not cost a
text-only agent anything per turn (issue 22): appended messages are counted as they arrive (one type check each for
text), and the whole view only after a rewrite, and only when some limit is known at all.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..media.budget import MediaTally, media_of, request_bytes
from ..media.limits import MediaLimits, known_limits
from ..messages import Message

__all__ = ["MediaGuard"]


class MediaGuard:
    """The limits in force for one manager, and the media its view carries. Not thread-safe: the manager's lock."""

    def __init__(self, provider: str | None) -> None:
        self.published = known_limits(provider)
        self.learned = MediaLimits()
        self.limits = self.published
        self._tally = MediaTally()
        # ((view version, settle edits), messages counted) the tally is of
        self._counted: tuple[tuple[int, int], int] | None = None

    def learn(self, limits: MediaLimits) -> bool:
        """Lower the limits to ``limits`` where it is stricter; True when something went down."""
        learned = self.learned.lower(limits)
        if learned == self.learned:
            return False
        self.learned = learned
        self.limits = self.published.lower(learned)
        return True

    def tally(self, raw: Sequence[Message], version: tuple[int, int]) -> MediaTally:
        """The media of ``raw`` (the view's stored messages, at ``version``): only what was appended is counted anew.

        ``version``: the view's version and its settle edits (anything but an append changes one of them: settling
        drops or inserts messages before the end, which would shift what was counted). Normalization only drops
        messages or adds text-only ones, so the stored messages' media bound the request's.
        """
        counted = self._counted
        if counted is not None and counted[0] == version and counted[1] <= len(raw):
            tally = self._tally
            for m in raw[counted[1]:]:
                media = media_of(m)
                if media.items:
                    tally = tally + media
        else:
            tally = MediaTally()
            for m in raw:
                tally = tally + media_of(m)
        self._tally, self._counted = tally, (version, len(raw))
        return tally

    def over(self, tally: MediaTally, text_tokens: int) -> bool:
        """Whether a request with ``tally`` of media and ``text_tokens`` of text breaks a limit in force."""
        limits = self.limits
        return ((limits.max_items is not None and tally.items > limits.max_items)
                or (limits.max_bytes is not None and request_bytes(tally, text_tokens) > limits.max_bytes))
