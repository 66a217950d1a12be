"""The model registry: lookups, name normalisation, overrides, optional price sources, UnknownModel."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from contextfold.errors import UnknownModel
from contextfold.tokens import (
    ModelInfo,
    get_model,
    guess_provider,
    known_models,
    lookup_model,
    models,
    normalize_name,
    register_model,
    unregister_model,
)
from contextfold.tokens.models import BUILTIN_MODELS


@pytest.fixture(autouse=True)
def clean_registry() -> Iterator[None]:
    yield
    for name in list(models._USER):
        unregister_model(name)
    models._RESOLVED.clear()


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("gpt-4o", "gpt-4o"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("openai/gpt-4o-mini", "gpt-4o-mini"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("GPT-4.1-2025-04-14", "gpt-4.1"),
        ("azure/gpt-4.1-nano", "gpt-4.1-nano"),
        ("gpt-4-0613", "gpt-4"),
        ("gpt-4-turbo-2024-04-09", "gpt-4-turbo"),
        ("o3-mini-2025-01-31", "o3-mini"),
        ("o3-2025-04-16", "o3"),
        ("gpt-5-mini-2025-08-07", "gpt-5-mini"),
        ("claude-sonnet-4-20250514", "claude-sonnet-4"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("anthropic/claude-3-5-sonnet-latest", "claude-3-5-sonnet"),
        ("claude-3-7-sonnet@20250219", "claude-3-7-sonnet"),
        ("us.anthropic.claude-3-7-sonnet-20250219-v1:0", "claude-3-7-sonnet"),
        ("claude-haiku-4-5", "claude-haiku-4-5"),
        ("gemini/gemini-2.5-pro", "gemini-2.5-pro"),
        ("models/gemini-2.0-flash", "gemini-2.0-flash"),
        ("gemini-2.5-flash-preview-05-20", "gemini-2.5-flash"),
        ("gemini-2.5-flash-lite", "gemini-2.5-flash-lite"),
        ("meta-llama/Llama-3.3-70B-Instruct", "llama-3.3-70b"),
        ("groq/llama-3.3-70b-versatile", "llama-3.3-70b"),
        ("llama3.1:8b", "llama-3.1-8b"),
        ("Qwen/Qwen2.5-72B-Instruct", "qwen2.5-72b"),
        ("mistral-large-latest", "mistral-large"),
        ("deepseek/deepseek-chat", "deepseek-chat"),
    ],
)
def test_names_resolve_to_their_model(name: str, canonical: str) -> None:
    assert get_model(name).name == canonical


def test_table_rows_are_sane() -> None:
    names = [row[0] for row in BUILTIN_MODELS]
    assert len(names) == len(set(names))
    for row in BUILTIN_MODELS:
        info = ModelInfo(*row)
        assert info.name == normalize_name(info.name)
        assert 0 < info.max_output_tokens <= info.context_window, info.name
        assert info.provider in {"openai", "anthropic", "google", "meta", "qwen", "mistral", "deepseek"}
        if info.provider == "anthropic":  # reads ~0.1x, 5-minute writes ~1.25x, 1-hour writes 2x the input price
            assert info.input_price is not None and info.cache_write_1h_price == 2 * info.input_price, info.name
            assert info.cache_read_price is not None and info.cache_write_price is not None
            assert info.cache_read_price <= 0.12 * info.input_price < info.input_price < info.cache_write_price
        else:  # nobody else charges for writing to the cache
            assert info.cache_write_price is None and info.cache_write_1h_price is None, info.name
    assert {"gpt-4o", "gpt-5", "o3", "claude-sonnet-4-5", "gemini-2.5-pro", "llama-3.3-70b"} <= set(known_models())


def test_key_figures_of_current_models() -> None:
    gpt4o = get_model("gpt-4o")
    assert (gpt4o.provider, gpt4o.context_window, gpt4o.max_output_tokens, gpt4o.tokenizer) == (
        "openai",
        128_000,
        16_384,
        "o200k_base",
    )
    assert get_model("gpt-4").tokenizer == "cl100k_base"
    assert get_model("gpt-4.1").context_window == 1_047_576
    assert get_model("claude-sonnet-4-5").context_window == 200_000
    assert get_model("gemini-2.5-pro").context_window == 1_048_576


def test_unknown_model_says_how_to_pass_a_window() -> None:
    with pytest.raises(UnknownModel) as err:
        get_model("acme-brain-9000")
    message = str(err.value)
    assert "acme-brain-9000" in message
    assert "max_context_tokens=" in message and "register_model(" in message
    assert lookup_model("acme-brain-9000") is None


def test_explicit_window_makes_an_unknown_model_usable() -> None:
    info = get_model("acme-brain-9000", context_window=32_000)
    assert info.context_window == 32_000
    assert 0 < info.max_output_tokens <= 8_192
    assert info.tokenizer == "estimate"
    claude = get_model("claude-next-generation", context_window=500_000)
    assert (claude.provider, claude.tokenizer) == ("anthropic", "claude")


def test_keyword_overrides_win_over_the_table() -> None:
    info = get_model("gpt-4o", context_window=64_000)
    assert info.context_window == 64_000
    assert info.max_output_tokens == 16_384
    small = get_model("gpt-4o", context_window=8_000)
    assert small.max_output_tokens <= 8_000  # an output cap above the window is shrunk
    assert get_model("gpt-4o", max_output_tokens=1000).max_output_tokens == 1000
    assert get_model("gpt-4o").context_window == 128_000  # overrides do not stick


def test_register_model_wins_and_fills_the_rest() -> None:
    register_model("gpt-4o", context_window=100_000, input_price=1.0)
    info = get_model("openai/gpt-4o-2024-11-20")
    assert (info.context_window, info.input_price, info.tokenizer) == (100_000, 1.0, "o200k_base")
    mine = register_model("my-finetune", context_window=16_000, max_output_tokens=2_000, tokenizer="cl100k_base")
    assert get_model("my-finetune") == mine
    assert "my-finetune" in known_models()
    unregister_model("my-finetune")
    with pytest.raises(UnknownModel):
        get_model("my-finetune")


def test_register_unknown_model_without_window_is_unknown_model() -> None:
    with pytest.raises(UnknownModel, match="register_model"):
        register_model("acme-brain-9000", input_price=1.0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"context_window": 0}, "context_window: must be a positive integer"),
        ({"context_window": 1000, "max_output_tokens": 5000}, "max_output_tokens: must be a positive integer"),
        ({"context_window": 1000, "input_price": -1.0}, "input_price: must be >= 0"),
    ],
)
def test_bad_overrides_name_the_field(kwargs: dict[str, float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        register_model("broken-model", **kwargs)  # type: ignore[arg-type]


def test_bad_name_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="model: expected a model name"):
        get_model("  ")


@pytest.mark.parametrize(
    ("name", "provider"),
    [("gpt-4o", "openai"), ("o4-mini", "openai"), ("claude-x", "anthropic"), ("gemini-9", "google"), ("x", "other")],
)
def test_guess_provider(name: str, provider: str) -> None:
    assert guess_provider(name) == provider


def test_cost_uses_prices_per_million() -> None:
    info = ModelInfo("m", "openai", 1000, 100, "o200k_base", 2.0, 8.0, 0.5, None)
    assert info.cost(input=1_000_000, output=500_000, cache_read=2_000_000) == pytest.approx(2.0 + 4.0 + 1.0)
    assert info.cost(cache_creation=1_000_000) == pytest.approx(2.0)  # no write surcharge: input price
    claude = ModelInfo("c", "anthropic", 1000, 100, "claude", 3.0, 15.0, 0.3, 3.75, 6.0)
    assert claude.cost(cache_creation=1_000_000, cache_creation_1h=1_000_000) == pytest.approx(3.75 + 6.0)
    assert ModelInfo("m", "meta", 1000, 100, "llama3").cost(input=10) is None


# ---- optional sources -------------------------------------------------------------------------------------------


def test_prices_come_from_genai_prices_when_installed() -> None:
    genai_prices = pytest.importorskip("genai_prices")
    calc = genai_prices.calc_price(genai_prices.Usage(input_tokens=1000), "claude-sonnet-4-5")
    info = get_model("claude-sonnet-4-5")
    price = calc.model_price

    def base(value: object) -> float:
        return float(getattr(value, "base", value))  # type: ignore[arg-type]

    assert info.input_price == base(price.input_mtok)
    assert info.output_price == base(price.output_mtok)
    assert info.cache_write_price == base(price.cache_write_mtok)
    assert info.cache_write_1h_price == base(price.cache_write_1h_mtok) == 6.0


def test_table_prices_are_the_fallback_without_genai_prices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(models, "find_spec", lambda name: None)
    models._RESOLVED.clear()
    info = get_model("gpt-4o")
    assert (info.input_price, info.output_price, info.cache_read_price) == (2.5, 10.0, 1.25)


def test_model_only_genai_prices_knows_gets_its_window() -> None:
    pytest.importorskip("genai_prices")
    # grok-4 is not in the table; genai-prices states its window.
    assert "grok-4" not in known_models()
    info = lookup_model("grok-4")
    assert info is not None
    assert info.context_window > 100_000 and info.input_price is not None
    assert lookup_model("grok-4", with_prices=False) is None  # the price source is skipped when not wanted


def test_litellm_bundled_map_is_read_without_importing_litellm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "litellm"
    package.mkdir()
    (package / "__init__.py").write_text("raise RuntimeError('litellm must not be imported')\n")
    entries = {
        "sample_spec": {"max_input_tokens": "set to max input tokens"},
        "together_ai/acme/brain-7b": {
            "max_input_tokens": 65_536,
            "max_output_tokens": 4_096,
            "input_cost_per_token": 2e-07,
            "output_cost_per_token": 6e-07,
            "litellm_provider": "together_ai",
        },
    }
    (package / models._LITELLM_MAP_FILE).write_text(json.dumps(entries))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(models, "_LITELLM_INDEX", None)
    models._RESOLVED.clear()
    info = get_model("together_ai/acme/brain-7b")
    assert (info.context_window, info.max_output_tokens) == (65_536, 4_096)
    assert info.input_price == pytest.approx(0.2) and info.output_price == pytest.approx(0.6)
    assert "litellm" not in sys.modules


def test_importing_models_pulls_no_optional_package() -> None:
    code = (
        "import sys, contextfold.tokens.models; "
        "print([m for m in ('genai_prices', 'litellm', 'tiktoken') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
