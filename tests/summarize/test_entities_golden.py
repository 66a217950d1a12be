"""Entity extraction and digest material give, text for text, what the tree before the issue 22 rewrite gave.

tests/golden/entities/corpus.json holds a hash of each generated text's entities by kind, bare numbers and digest
material (``entity_corpus.reading_hash``), computed at 37c7cef. The texts are read in order with the process-wide
memos as they come (words and lines remembered from the texts before), then again from empty memos.
"""

from __future__ import annotations

import json
from pathlib import Path

from entity_corpus import CORPUS_TEXTS, corpus_texts, reading_hash

from contextfold.cache import _digest
from contextfold.summarize import entities

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "entities" / "corpus.json"


def _forget() -> None:
    entities._cache.clear()
    entities._numbers_cache.clear()
    _digest._materials.clear()


def test_every_generated_text_reads_as_it_did_before_the_rewrite() -> None:
    golden = json.loads(GOLDEN.read_text())
    texts = corpus_texts()
    assert len(golden) == len(texts) == CORPUS_TEXTS
    _forget()
    warm = [reading_hash(text) for text in texts]
    _forget()
    entities._unit_memo.clear()
    cold = [reading_hash(text) for text in reversed(texts)][::-1]
    differing = [i for i, (want, got) in enumerate(zip(golden, warm, strict=True)) if want != got]
    assert not differing, [texts[i][:200] for i in differing[:3]]
    assert cold == golden
