"""``put`` of a text object given before skips hashing it again (issue 22), and stays exact."""

from __future__ import annotations

from contextfold.cache import ToolOutputCache
from contextfold.cache.refs import ref_id_for
from contextfold.stores.memory import MemoryBlobStore


def _output(tag: str) -> str:
    return "".join(f"{tag} line {i} of a long tool output\n" for i in range(400))  # ~13,000 characters


def test_the_same_text_object_and_an_equal_one_get_the_content_address() -> None:
    cache = ToolOutputCache(MemoryBlobStore())
    text = _output("a")
    first = cache.put(text)
    again = cache.put(text)
    equal = cache.put("".join([text[:10], text[10:]]))  # another object, the same characters
    assert first == again == equal
    assert first.id == ref_id_for(text.encode())
    assert cache.put(_output("b")).id == ref_id_for(_output("b").encode()) != first.id


def test_an_output_the_store_lost_is_written_again_by_the_next_put_of_its_text() -> None:
    store = MemoryBlobStore()
    cache = ToolOutputCache(store)
    text = _output("a")
    ref = cache.put(text)
    assert store.delete(ref.id)
    assert cache.put(text) == ref
    assert cache.get(ref.id) == text
