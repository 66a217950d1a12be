"""Tool-call arguments with JSON escapes are read as redaction reads them: the text and what it decodes to (issue 22).

A code edit's arguments hold escaped newlines and quotes. The ledger's re-check (``mentions_any``) and the batch
prefilter (``surface``) used to give up on them, so such a message was redacted again for every secret learned
since it was last redacted, and scanned whole in every batch. They now look in the decoded strings too: a value
remembered in its decoded form (a newline, a quote, a non-ASCII letter) is still found, and the result is exactly
what a redactor with no ledger makes.
"""

from __future__ import annotations

import json

import pytest

from contextfold.messages import Message, ToolCall
from contextfold.redact import Redactor
from contextfold.redact._ledger import mentions_any, surface

NONCE = "q7vEsc4pe"  # (unique to this file: no cache of another test answers for it)


def _edit(i: int, text: str, *, ensure_ascii: bool = True) -> Message:
    args = json.dumps({"path": f"/src/{NONCE}_{i}.py", "new_str": text}, ensure_ascii=ensure_ascii)
    return Message("assistant", "", (ToolCall(f"c{i}", "str_replace_editor", args),), meta={"id": f"{NONCE}:{i}"})


def _edits() -> list[Message]:
    texts = [f"def f_{NONCE}():\n    return \"ok\"\n", "line one\n\tline two\\n", "caf\u00e9 \u2603 done\n"]
    return [_edit(i, text, ensure_ascii=i % 2 == 0) for i, text in enumerate(texts)]


def _oracle_result(history: list[Message], secrets: list[str], m: Message) -> Message:
    """``m`` redacted by a redactor without a ledger (a callback keeps none) that knows the same secrets."""
    oracle = Redactor(callback=lambda text: text)
    for secret in secrets:
        oracle.learn(secret, "password")
    oracle.learn_from(history)
    return oracle.redact_message(m)


def test_escaped_arguments_are_not_redacted_again_for_a_secret_they_do_not_mention(
        monkeypatch: pytest.MonkeyPatch) -> None:
    r = Redactor()
    history = _edits()
    assert r.redact_messages(history) == history
    r.learn(f"unrelated-{NONCE}-value", "password")
    walked: list[str] = []
    real = Redactor._redact_fields

    def counting(self: Redactor, m: Message) -> Message:
        walked.append(str(m.meta["id"]))
        return real(self, m)

    monkeypatch.setattr(Redactor, "_redact_fields", counting)
    assert [r.redact_message(m) for m in history] == history
    assert walked == []


def test_a_batch_of_clean_escaped_arguments_is_cleared_by_the_prefilter(monkeypatch: pytest.MonkeyPatch) -> None:
    r = Redactor()
    monkeypatch.setattr(Redactor, "_redact_fields",
                        lambda self, m: pytest.fail(f"{m.meta['id']} scanned: the prefilter could not clear it"))
    history = _edits()
    assert r.redact_messages(history) == history


@pytest.mark.parametrize("secret", [f"line\n{NONCE}\"x", f"caf\u00e9{NONCE}", f"tab\t{NONCE}\\n"])
def test_a_secret_found_only_in_the_decoded_arguments_is_redacted(secret: str) -> None:
    history = [_edit(0, f"before {secret} after"), _edit(1, f"prefix {secret}", ensure_ascii=False)]
    r = Redactor()
    r.redact_messages(history)  # (recorded before the secret is known)
    assert secret not in history[0].tool_calls[0].arguments  # (the raw text holds its escaped form)
    r.learn(secret, "password")
    for m in history:
        assert mentions_any(m, [secret])
        assert r.redact_message(m) == _oracle_result(history, [secret], m)
        assert secret not in json.loads(r.redact_message(m).tool_calls[0].arguments)["new_str"]


def test_surface_lists_the_decoded_strings_and_is_unsure_only_of_a_non_ascii_key() -> None:
    m = _edit(0, "a\nb")
    strings = surface(m)
    assert strings is not None and "a\nb" in strings and m.tool_calls[0].arguments in strings
    plain = Message("assistant", "", (ToolCall("c", "t", "not json \\n at all"),))
    assert surface(plain) == ["", "not json \\n at all"]  # (its empty content, then the text: all it reads)
    odd_key = Message("assistant", "", (ToolCall("c", "t", json.dumps({"\u017fecret": "x\n"})),))
    assert surface(odd_key) is None
