"""The public surface is exactly ``__all__``, sorted, and every name in it resolves."""

from __future__ import annotations

import subprocess
import sys

import contextfold


def test_all_is_sorted() -> None:
    assert contextfold.__all__ == sorted(contextfold.__all__)


def test_every_exported_name_resolves() -> None:
    for name in contextfold.__all__:
        assert getattr(contextfold, name) is not None, name


def test_no_private_leak_in_dir() -> None:
    public = {name for name in dir(contextfold) if not name.startswith("_")}
    assert public <= set(contextfold.__all__)


def test_exported_classes_claim_the_package() -> None:
    for name in contextfold.__all__:
        value = getattr(contextfold, name)
        module = getattr(value, "__module__", "contextfold")
        assert module.startswith("contextfold"), (name, module)


def test_import_pulls_no_optional_dependency() -> None:
    code = (
        "import sys, contextfold; "
        "bad = [m for m in ('openai', 'anthropic', 'litellm', 'redis', 'boto3', 'langchain', 'agents', "
        "'pydantic_ai', 'opentelemetry', 'tiktoken', 'pydantic') if m in sys.modules]; "
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""


def test_all_matches_the_lazy_map() -> None:
    assert set(contextfold.__all__) == set(contextfold._EXPORTS) | {"__version__"}


def test_public_functions_are_functions_even_after_their_modules_load() -> None:
    # A module sharing its name with a public function would shadow it once imported (contextfold.normalize was the
    # pairing module, so `from contextfold import normalize` gave a module after the first prepare()).
    import importlib

    import contextfold.pairing
    from contextfold import ContextManager

    ContextManager("gpt-4o", store="memory", archive="memory").close()
    for name in ("normalize", "classify", "compact", "history_search", "decide", "truncate_text"):
        value = getattr(importlib.import_module("contextfold"), name)
        assert callable(value) and not isinstance(value, type(contextfold.pairing)), name
