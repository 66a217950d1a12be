"""The media limits a manager keeps its view within, and the view's media counted incrementally.

The limits in force are the provider's published ones (:func:`contextfold.media.known_limits`), lowered by what its
errors taught (:meth:`MediaGuard.learn`, from overflow recovery). What is learned is kept in the blob store per model
(``media-limit:<model>``, the lowest learned), as token limits are: the proxy and fleet workers run each request on a
fresh manager, which would otherwise send too many images again and meet the same refusal. A limit that may be one
request's alone (a refusal naming none) is kept under the session instead (``session-limit.<owner tag>:media-limit:
<model>``, read by no other session and aged with it, as a session's own token limit), read only where the model has
a record (when it has none, one with no limit marks that some session keeps its own). The store is read once,
when the view first holds an image or document. Counting the view's media must not cost a
text-only agent anything per turn (issue 22): appended messages are counted as they arrive (one type check each for
text), and the whole view only after a rewrite, and only when some limit is known at all.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..media.budget import MediaTally, media_of, request_bytes
from ..media.limits import MediaLimits, known_limits
from ..messages import Message
from ._limits import session_limit_key, store_losses

__all__ = ["MEDIA_LIMIT_KEY_PREFIX", "MediaGuard", "media_limit_key"]

# Keys of the media limits learned per model (not ref ids: the store's retention leaves them, as ``limit:<model>``).
MEDIA_LIMIT_KEY_PREFIX = "media-limit:"
_MAX_RECORD_BYTES = 4_096


def media_limit_key(model: str) -> str:
    """The blob-store key of the media limits learned for ``model``."""
    return MEDIA_LIMIT_KEY_PREFIX + model


class MediaGuard:
    """The limits in force for one manager, and the media its view carries. Not thread-safe: the manager's lock."""

    def __init__(self, provider: str | None, *, model: str = "", store: Any = None,
                 warn: Callable[[str], None] | None = None, session_tag: str | None = None) -> None:
        self.published = known_limits(provider)
        self.learned = MediaLimits()
        self._shared = MediaLimits()  # the part of ``learned`` that holds for every caller of the model (stored)
        self.limits = self.published
        self._model = model
        self._store = store  # a BlobStore, or None (the limits live as long as the manager)
        self._warn = warn
        # where the session keeps what it learned for itself alone (None: nowhere, the manager keeps it)
        self._own_key = session_limit_key(media_limit_key(model), session_tag) if session_tag is not None else None
        self._model_recorded = False  # whether the store holds the model's record (limits, or none)
        self._loaded = store is None
        self._losses = store_losses(store)  # the store's count of possible losses when its records were last known
        self._tally = MediaTally()
        # ((view version, settle edits), messages counted) the tally is of
        self._counted: tuple[tuple[int, int], int] | None = None

    @property
    def may_know(self) -> bool:
        """Whether a limit is known, or may be in the store (not read yet)."""
        return self.limits.known or not self._loaded

    def load(self) -> None:
        """Read the limits learned for the model by earlier managers (once; a failing store is skipped)."""
        if self._loaded:
            return
        self._loaded = True
        stored = self._read()
        self._model_recorded = stored is not None
        # (a session's own record exists only beside the model's: one round trip for a model with none)
        own = self._read(self._own_key) if stored is not None and self._own_key is not None else None
        if stored is not None:
            self._shared = self._shared.lower(stored)
        kept = self._shared.lower(own) if own is not None else self._shared
        if kept.known:
            self.learned = self.learned.lower(kept)
            self.limits = self.published.lower(self.learned)

    def learn(self, limits: MediaLimits, *, shared: bool = True) -> bool:
        """Lower the limits to ``limits`` where it is stricter; True when something went down.

        Kept in the store for the model when ``shared``; otherwise under the session (what one refusal that names
        no limit taught: it may be this request's alone), read by its later managers only.
        """
        self.load()
        if shared:
            lower_shared = self._shared.lower(limits)
            if lower_shared != self._shared:  # (even where this manager's own limits are lower still)
                self._shared = lower_shared
                self._write()
        learned = self.learned.lower(limits)
        if learned == self.learned:
            return False
        self.learned = learned
        self.limits = self.published.lower(learned)
        if learned != self._shared:
            self._write_own()
        return True

    def restore_if_lost(self, losses: int | None = None) -> bool:
        """Write the learned limits again when the store says it may have lost them (a Redis restarted empty).

        As :meth:`ProviderLimit.restore_if_lost <contextfold.manager._limits.ProviderLimit.restore_if_lost>`: the
        store's counter, no round trip when nothing was lost. Without it the next manager of the model (another
        worker, the proxy's next request) sent every image again and met the provider's refusal again.
        """
        losses = store_losses(self._store) if losses is None else losses  # (``losses``: the counter as just read)
        if losses == self._losses:
            return False
        self._losses = losses
        if not self.learned.known:
            return False
        self._model_recorded = False  # (the record naming none may be gone with the rest)
        if self._shared.known:
            self._write()
        if self.learned != self._shared:
            self._write_own()
        return True

    def _read(self, key: str | None = None) -> MediaLimits | None:
        """The limits under ``key`` (the model's record by default), None where the store holds no record of ours."""
        if self._store is None:
            return None
        from ..errors import RefNotFound

        try:
            raw = self._store.get(key if key is not None else media_limit_key(self._model))
            data = json.loads(raw) if len(raw) <= _MAX_RECORD_BYTES else None
        except RefNotFound:
            return None
        except ValueError:
            return None  # not a record of ours: the next refusal teaches the limits again
        except Exception as exc:
            self._report(f"could not read the learned media limits of {self._model!r} from the store: {exc}")
            return None
        if not isinstance(data, dict):
            return None
        return MediaLimits(_positive(data.get("max_bytes")), _positive(data.get("max_items")))

    def _write(self) -> None:
        if self._store is None:
            return
        # Another manager may have learned lower limits meanwhile: the store keeps the lowest of each.
        stored = self._read()
        lowest = self._shared.lower(stored) if stored is not None else self._shared
        self._model_recorded = self._put(media_limit_key(self._model), lowest)

    def _write_own(self) -> None:
        """Keep under the session what it learned for itself (and give the model a record: its managers read it)."""
        if self._store is None or self._own_key is None:
            return
        if not self._model_recorded:
            self._write()  # (no limit for every caller, most often: a record that names none)
        self._put(self._own_key, self.learned)

    def _put(self, key: str, limits: MediaLimits) -> bool:
        record = {"model": self._model, "max_bytes": limits.max_bytes, "max_items": limits.max_items,
                  "saved_at": time.time()}
        try:
            self._store.put(key, json.dumps(record).encode())
        except Exception as exc:
            self._report(f"could not save the learned media limits of {self._model!r} to the store: {exc}")
            return False
        return True

    def _report(self, message: str) -> None:
        if self._warn is not None:
            self._warn(message)

    def tally(self, raw: Sequence[Message], version: tuple[int, int]) -> MediaTally:
        """The media of ``raw`` (the view's stored messages, at ``version``): only what was appended is counted anew.

        ``version``: the view's media version and its settle edits (anything but an append or a rewrite that keeps
        every message's media, such as a masking, changes one of them: settling
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
            for m in raw:  # (the additions of text-only messages are skipped; a masking keeps the version)
                media = media_of(m)
                if media.items:
                    tally = tally + media
        self._tally, self._counted = tally, (version, len(raw))
        return tally

    def over(self, tally: MediaTally, text_tokens: int) -> bool:
        """Whether a request with ``tally`` of media and ``text_tokens`` of text breaks a limit in force."""
        limits = self.limits
        return ((limits.max_items is not None and tally.items > limits.max_items)
                or (limits.max_bytes is not None and request_bytes(tally, text_tokens) > limits.max_bytes))


def _positive(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
