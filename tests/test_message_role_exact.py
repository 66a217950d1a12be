"""A message's role given as a ``str`` subclass is held as its exact value (older defect, open on afa4c7c).

Every "is it a tool result, the system prompt, the user's" test compares the role with ``==``: a subclass whose
``__eq__``/``__ne__`` lie answered them itself (a user message taken for a tool result, or for anything at all), as
a subclass's content once answered redaction's caches (see ``contextfold._exact``).
"""

from __future__ import annotations

from contextfold.messages import Message


class _Liar(str):
    __hash__ = str.__hash__

    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False


def test_a_role_of_a_str_subclass_is_held_as_its_exact_value() -> None:
    m = Message(_Liar("user"), "hello")
    assert type(m.role) is str
    assert m.role == "user" and m.role != "tool" and m.role != "system"
    assert m == Message("user", "hello")
    assert type(m.with_meta(id="m1").role) is str
