"""The key rule holds in bulk when the built-in patterns are off (twelfth red team, the lead).

``{"password": …}`` in a message's meta or a tool call's arguments is redacted by the key rule whatever the patterns.
With ``builtin=False`` the bulk prefilter only looked for the user's patterns' triggers: no text held ``password``
for it, so ``redact_messages`` cleared such messages and handed their secrets on, while ``redact_message`` (one by
one) redacted them. On 37c7cef both values below left in clear in bulk.
"""
from __future__ import annotations

import re

import pytest

from contextfold.messages import Message, ToolCall
from contextfold.redact import Redactor, SecretPattern

_NONCE = "q7Rk2"
_OWN = [SecretPattern("acme", re.compile(r"ACME-[0-9]{8}"), triggers=("acme-",))]


def _messages() -> list[Message]:
    return [
        Message(role="user", content="hello there", meta={"db_password": f"hunter-{_NONCE}-meta"}),
        Message(role="assistant", content="", tool_calls=[
            ToolCall(id="c1", name="login", arguments=f'{{"user": "ann", "api_token": "tok-{_NONCE}-args"}}')]),
        Message(role="tool", content="ok ACME-12345678", tool_call_id="c1"),
    ]


@pytest.mark.parametrize("own", [_OWN, []], ids=["own patterns", "no patterns"])
def test_bulk_redaction_applies_the_key_rule_without_the_builtins(own: list[SecretPattern]) -> None:
    bulk = Redactor(builtin=False, patterns=own).redact_messages(_messages())
    one_by_one = [Redactor(builtin=False, patterns=own).redact_message(m) for m in _messages()]

    assert [m.meta for m in bulk] == [m.meta for m in one_by_one]
    assert bulk[0].meta == {"db_password": "[REDACTED:password]"}
    assert bulk[1].tool_calls[0].arguments == '{"user": "ann", "api_token": "[REDACTED:api_key]"}'
    assert bulk[1].tool_calls[0].arguments == one_by_one[1].tool_calls[0].arguments
    assert _NONCE not in repr([m.meta for m in bulk] + [c.arguments for m in bulk for c in m.tool_calls])
    assert bulk[2].content == ("ok [REDACTED:acme]" if own else "ok ACME-12345678")
