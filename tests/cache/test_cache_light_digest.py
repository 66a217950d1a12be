"""The light digest (issue 22, ``policy.mask_digest="light"``): a masked output's entities by kind as first seen,
checked for secrets at once. Its placeholder for a fixed output, exactly; never a secret in it (one a
rule finds, one the session learned from a ``password=`` elsewhere and that comes back bare, a piece of a key);
never over its budget; the same placeholder built ahead by the read-ahead or cold by the masking; and the policy
field refuses what it does not know."""

from __future__ import annotations

import base64
import json
import random
import re
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from contextfold import ContextManager
from contextfold.cache import ToolOutputCache, mask_tool_outputs
from contextfold.cache._digest import digest_source
from contextfold.cache._light_digest import light_digest
from contextfold.cache.masking import placeholder_ahead
from contextfold.compaction import Policy
from contextfold.errors import ConfigError
from contextfold.messages import Message, ToolCall
from contextfold.redact import Redactor
from contextfold.stores import MemoryBlobStore
from contextfold.summarize import entities
from contextfold.tokens import MessageCounter, TiktokenCounter

COUNTER = MessageCounter(TiktokenCounter("o200k_base"))


def _nonce() -> str:
    return datetime.now(UTC).strftime("%H%M%S%f")  # texts no other test read (entities and counts are remembered)


def _cache(redactor: Redactor | None = None) -> ToolOutputCache:
    cache = ToolOutputCache(MemoryBlobStore())
    cache.secrets = redactor
    return cache


def _masked(output: str, *, tokens: int = 24, cache: ToolOutputCache | None = None,
            arguments: str = '{"cmd": "pytest"}', before: tuple[Message, ...] = ()) -> str:
    """The content of ``output``'s placeholder, masked with a light digest of ``tokens`` tokens."""
    cache = cache if cache is not None else _cache()
    history = [*before, Message("assistant", "", (ToolCall("c1", "bash", arguments),)),
               Message("tool", output, tool_call_id="c1", name="bash"), Message("assistant", "done")]
    result = mask_tool_outputs(history, budget_tokens=0, counter=COUNTER, cache=cache, keep_tool_io_pairs=0,
                               clear_at_least=0, digest_tokens=tokens, digest_kind="light", secrets=cache.secrets)
    assert result.masked_indices == (len(before) + 1,)
    content = result.messages[len(before) + 1].content
    assert isinstance(content, str)
    return content


def test_a_light_placeholder_lists_the_entities_by_kind_as_first_seen() -> None:
    n = _nonce()
    output = (f"collected 3 items\nsrc/app_{n}/loader.py::test_load_{n} FAILED\n"
              f"E   KeyError: 'user_id' in parse_row_{n}\nsrc/app_{n}/rows.py:12: KeyError\n"
              f"FAILED src/app_{n}/loader.py::test_load_{n} - KeyError\n1 failed, 2 passed in 0.31s\n"
              + "all fine\n" * 150)
    content = _masked(output, tokens=200)
    ref = re.search(r"ref=(tout_[0-9a-f]+)", content)
    assert ref is not None
    # By kind (paths, errors, tests, codes, identifiers), each as first seen, once; the bare numbers are not listed.
    assert content == (f"[tool output trimmed; ref={ref.group(1)}; it mentioned: src/app_{n}/rows.py, KeyError, "
                       f"src/app_{n}/loader.py::test_load_{n}, FAILED, user_id, parse_row_{n}]")


def test_a_light_digest_skips_what_does_not_fit_for_a_shorter_item() -> None:
    output = ("Traceback (most recent call last):\n  File \"/repo/pkg/core.py\", line 88, in resolve_name\n"
              "ImportError: cannot import name 'load_config' from 'pkg.settings'\n")
    assert light_digest(output, budget_tokens=64, counter=COUNTER.counter).text == (
        "/repo/pkg/core.py, ImportError, pkg.settings, resolve_name, load_config")
    # Each item's count and a separator's within the budget; one that does not fit is skipped for a shorter one.
    assert light_digest(output, budget_tokens=10, counter=COUNTER.counter).text == "/repo/pkg/core.py, ImportError"
    assert light_digest(output, budget_tokens=4, counter=COUNTER.counter).text == "ImportError"


def test_items_the_call_names_are_left_out_and_a_zero_budget_lists_nothing() -> None:
    n = _nonce()
    output = f"reading /etc/app_{n}.conf\nValueError in check_{n}\n" * 20
    assert f"/etc/app_{n}.conf" not in _masked(output, arguments=json.dumps({"cmd": f"cat /etc/app_{n}.conf"}))
    assert light_digest(output, budget_tokens=0, counter=COUNTER.counter).text == ""


def test_an_unknown_digest_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="digest_kind must be one of full, light"):
        mask_tool_outputs([], budget_tokens=0, counter=COUNTER, cache=_cache(), digest_kind="lite")
    assert Policy(mask_digest="light").mask_digest == "light"
    assert Policy().mask_digest == "light"  # (the default since the seventeenth session)
    with pytest.raises(ValidationError, match="mask_digest"):
        Policy(mask_digest="lite")  # type: ignore[arg-type]
    with pytest.raises(ConfigError) as raised:
        ContextManager("gpt-4o", policy={"mask_digest": "lite"})
    assert raised.value.field == "policy.mask_digest"


def test_an_output_too_long_to_read_lists_nothing_and_its_ends_are_not_read() -> None:
    # (Issue 22, seventeenth session: two windows of a long output were extracted cold for each light digest, a
    # third of its cost, for no recall measured; the full digest still reads them.)
    n = _nonce()
    head = f"FAILED src/app_{n}/loader.py::test_load_{n} - KeyError: parse_row_{n}\n"
    tail = f"E   ValueError in finish_{n}\n1 failed in 0.31s\n"
    output = head + "collected item ok\n" * 180 + tail
    assert len(output) > 3_000  # (the full digest's bound for reading an output whole)
    content = _masked(output, tokens=200)
    ref = re.search(r"ref=(tout_[0-9a-f]+)", content)
    assert ref is not None and content == f"[tool output trimmed; ref={ref.group(1)}]"
    digest = light_digest(output, budget_tokens=200, counter=COUNTER.counter)
    assert digest.text == "" and digest.partial
    assert not entities.is_read(digest_source(output, 1_000, 500)[0])  # (the two windows lane A's digest read)
    short = head + "collected item ok\n" * 100 + tail  # (under the bound: read whole, as before)
    assert f"src/app_{n}/loader.py::test_load_{n}" in light_digest(short, budget_tokens=200,
                                                                   counter=COUNTER.counter).text


KEY_BODY = base64.b64encode(random.Random(5).randbytes(600)).decode()


def test_a_light_placeholder_never_holds_a_secret_found_learned_or_in_pieces() -> None:
    n = _nonce()
    learned = f"Qz7v{n}Lp2Rw9Xk"  # learned from a password= in an earlier message, then bare in the output
    pem = ("-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(KEY_BODY[i:i + 64] for i in range(0, len(KEY_BODY), 64))
           + "\n-----END RSA PRIVATE KEY-----")
    token = "ghp_" + "".join(random.Random(n).choices("abcdefghijklmnopqrstuvwxyz0123456789", k=36))
    output = (f"config_{n}.yaml loaded\nuser_token {learned} accepted by auth_{n}\n{pem}\n"
              f"pushed with {token} to origin_{n}\nsession {learned[:9]}_{n} ok\n")
    redactor = Redactor()
    earlier = Message("user", f"deploy with password={learned}")
    redactor.redact_message(earlier)  # (the session learns it as add() would)
    assert redactor.mentions_secret(learned)
    for tokens in (16, 64, 400):
        content = _masked(output, tokens=tokens, cache=_cache(redactor), before=(earlier,))
        assert "mentioned:" in content
        assert learned not in content and learned[:9] not in content and token not in content
        assert not [run for run in re.findall(r"[A-Za-z0-9]{12,}", content)
                    if any(run[i:i + 12] in KEY_BODY for i in range(len(run) - 11))]


def test_the_read_ahead_builds_the_placeholder_the_masking_writes() -> None:
    n = _nonce()
    redactor = Redactor()
    cache = _cache(redactor)
    output = "\n".join(f"/srv/{n}/pkg/mod_{i}.py:{i * 7}: AttributeError in run_{n}_{i}()" for i in range(30))
    message = Message("tool", output, tool_call_id="c1", name="bash")
    ahead = placeholder_ahead(message, cache, digest_tokens=24, known="", counter=COUNTER.counter,
                              secrets=redactor, digest_kind="light")
    cold = _masked(output, cache=_cache(Redactor()), arguments="")
    assert ahead == cold
    assert ahead is not None and f"/srv/{n}/pkg/mod_0.py" in ahead


WORDS = st.sampled_from(["src/app/main.py", "KeyError", "test_parse", "load_rows", "HTTP", "v2", "ok", "the",
                         "https://example.org/x", "a.b.c", "CamelCase", "x" * 60, "ü_name", "0x1f", "--flag"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(WORDS, max_size=8).map(" ".join), max_size=40).map("\n".join),
       st.integers(min_value=0, max_value=48))
def test_a_light_digest_is_never_over_its_budget_and_lists_only_what_the_output_says(text: str, budget: int) -> None:
    digest = light_digest(text, budget_tokens=budget, counter=COUNTER.counter)
    items = digest.text.split(", ") if digest.text else []
    count = COUNTER.counter.count
    assert sum(map(count, items)) + count(", ") * max(0, len(items) - 1) <= budget
    assert count(digest.text) <= budget
    assert all(item in text for item in items)
    assert light_digest(text, budget_tokens=budget, counter=COUNTER.counter) == digest  # (deterministic)
