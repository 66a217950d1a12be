"""``pair_list`` builds its pairs slot by slot (``make_pair``): equal to the dataclass's, without its ``__init__``."""

from __future__ import annotations

import pytest

from contextfold.messages import Message, ToolCall
from contextfold.pairing import ToolPair, make_pair, pair_list

_NONCE = "p4z8"


def _history() -> list[Message]:
    calls = [ToolCall(f"c{_NONCE}{i}", "bash", "{}") for i in range(3)]
    return [Message("user", f"go {_NONCE}"), Message("assistant", "", tool_calls=tuple(calls[:2])),
            Message("tool", "a", tool_call_id=calls[0].id), Message("tool", "b", tool_call_id=calls[1].id),
            Message("assistant", "", tool_calls=(calls[2],))]


def test_made_pairs_equal_the_dataclass_and_stay_frozen() -> None:
    made = make_pair(f"c{_NONCE}", "bash", 1, None)
    assert made == ToolPair(f"c{_NONCE}", "bash", 1, None)
    assert hash(made) == hash(ToolPair(f"c{_NONCE}", "bash", 1, None))
    with pytest.raises(AttributeError):
        made.call_index = 2  # type: ignore[misc]


def test_pair_list_does_not_run_the_dataclass_init(monkeypatch: pytest.MonkeyPatch) -> None:
    inits: list[object] = []
    init = ToolPair.__init__

    def counting(self: ToolPair, *args: object) -> None:
        inits.append(args)
        init(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(ToolPair, "__init__", counting)
    pairs = pair_list(_history())
    assert not inits
    assert pairs == [ToolPair(f"c{_NONCE}0", "bash", 1, 2), ToolPair(f"c{_NONCE}1", "bash", 1, 3),
                     ToolPair(f"c{_NONCE}2", "bash", 4, None)]
    assert pair_list([Message("user", _NONCE)]) == []
