"""A line ending in an unclosed shell expansion (``${DB_``) must not switch off the assignment rule on the next
line (sixteenth session, review of lane A). The rule turns down `password=x` inside `${DB_password=x}`; its
look-behind ended in `$`, which Python also matches before a final line end, so `echo ${DB_` then a line
`password=...` was left in clear by the whole-text redactor, and the light digest's joined check of its items (one
per line) answered "no secret" where the item alone said "secret"."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.cache import ToolOutputCache, mask_tool_outputs
from contextfold.messages import Message, ToolCall
from contextfold.redact import Redactor
from contextfold.stores import MemoryBlobStore
from contextfold.tokens import MessageCounter, TiktokenCounter

COUNTER = MessageCounter(TiktokenCounter("o200k_base"))


def _nonce() -> str:
    return datetime.now(UTC).strftime("%H%M%S%f")


def test_an_expansion_ending_the_line_before_does_not_hide_an_assignment() -> None:
    value = f"Zx9Qw7Lm3Tv8{_nonce()}"
    text = f"echo ${{DB_\npassword={value}"
    assert value not in Redactor().redact_text(text)
    assert Redactor().mentions_secret(text)


def test_an_assignment_inside_an_expansion_is_still_left_alone() -> None:
    text = "x=${DB_PASSWORD:-postgres} y=${DB_password=changeme} z=${POSTGRES_PASSWORD:?set it}"
    assert Redactor().redact_text(text) == text


def test_the_light_digest_lists_no_secret_after_an_expansion_item() -> None:
    n = _nonce()
    value = f"Kp8Vn3Xz7Qm{n}"
    output = f"`${{DB_` `api_key={value}`_`api_key={value}`x(\n" + "and some plain words here\n" * 40
    cache = ToolOutputCache(MemoryBlobStore())
    cache.secrets = Redactor()
    history = [Message("assistant", "", (ToolCall("c1", "bash", '{"cmd": "cat notes"}'),)),
               Message("tool", output, tool_call_id="c1", name="bash"), Message("assistant", "done")]
    result = mask_tool_outputs(history, budget_tokens=0, counter=COUNTER, cache=cache, keep_tool_io_pairs=0,
                               clear_at_least=0, digest_tokens=40, digest_kind="light", secrets=cache.secrets)
    content = result.messages[1].content
    assert isinstance(content, str) and "it mentioned:" in content
    assert value not in content


_NAME = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True)
_ITEM = st.one_of(
    _NAME.map(lambda name: "${" + name),
    st.tuples(st.sampled_from(["password", "api_key", "secret", "token"]),
              st.from_regex(r"[A-Za-z0-9]{12,20}", fullmatch=True)).map(lambda kv: f"{kv[0]}={kv[1]}"),
    st.from_regex(r"[a-z_/.]{1,16}", fullmatch=True),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_ITEM, min_size=1, max_size=6))
def test_items_joined_by_line_ends_mention_a_secret_when_one_alone_does(items: list[str]) -> None:
    # The light digest asks once about its items joined by line ends and asks item by item only on "yes".
    alone = any(Redactor().mentions_secret(item) for item in items)
    assert Redactor().mentions_secret("\n".join(items)) or not alone
