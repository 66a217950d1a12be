"""The operator's redaction callback, called once per distinct string (its result kept, bounded by characters).

``Redactor(callback=)`` is a last pass over every redacted string (a DLP service, an NER model). A compaction
redacts its view again for the transcript, the summary's input and its verbatim texts; without a memo the callback
ran on the same strings at every compaction of a session (issue 21). Its result must depend on its input only.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

# What the memo keeps alive: inputs and results, in characters (a string longer than this is never kept).
_MEMO_CHARS = 8_000_000


class CallbackMemo:
    """``callback(text)``, remembered: each distinct ``text`` is passed once while its result stays kept."""

    def __init__(self, callback: Callable[[str], str]) -> None:
        self.callback = callback
        self._results: OrderedDict[str, str] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def __call__(self, text: str) -> str:
        with self._lock:
            result = self._results.get(text)
            if result is not None:
                self._results.move_to_end(text)
                return result
        result = self.callback(text)
        size = len(text) + len(result)
        if size > _MEMO_CHARS // 4:
            return result
        with self._lock:
            if text not in self._results:
                self._results[text] = result
                self._chars += size
                while self._chars > _MEMO_CHARS:
                    old_text, old_result = self._results.popitem(last=False)
                    self._chars -= len(old_text) + len(old_result)
        return result
