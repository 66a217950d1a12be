"""The tool output cache: full outputs stored by ref, views in the context, masking, and the retrieval tools.

Contract: :class:`ToolOutputCache` codes against the :class:`BlobStore` protocol (``blobs``), never a backend; a tool
output over its limits is stored whole and replaced by a view (``_view``; few long lines by structure), masking
replaces old outputs by a placeholder holding the ref (``masking``), and the model reads any slice back with
``tool_output_cache`` / ``tool_output_cache_grep`` (``retrieval``, over the line index in ``_line_index``).
Outputs are claimed by the sessions that use them (``owners``): grep, reads and GC stay inside the caller's session.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ._cache import (
        DEFAULT_MAX_LINE_LENGTH,
        DEFAULT_MAX_MESSAGE_BYTES,
        CacheConfig,
        GcResult,
        ToolOutputCache,
        referenced_refs,
    )
    from ._line_index import build_line_index, count_lines
    from .blobs import BlobInfo, BlobStore
    from .masking import (
        DEFAULT_CLEAR_AT_LEAST,
        DEFAULT_KEEP_TOOL_IO_PAIRS,
        MaskResult,
        mask_tool_outputs,
        masked_placeholder,
        tool_output_tokens,
    )
    from .owners import (
        OWNER_INFIX,
        Retention,
        StoredOutput,
        delete_output,
        load_claims,
        owner_key,
        owner_tag,
        parse_owner_key,
        read_claim,
        survey,
        write_claim,
    )
    from .refs import REF_PATTERN, ToolOutputRef, is_ref_id, ref_id_for
    from .retrieval import (
        DEFAULT_GREP_MATCHES,
        DEFAULT_READ_LIMIT,
        GREP_TOOL,
        READ_TOOL,
        RETRIEVAL_TOOL_NAMES,
        GrepMatch,
        GrepResult,
        ReadResult,
        execute_tool_call,
        grep_refs,
        read_lines,
        retrieval_tool_schemas,
    )

# name -> the module that defines it, imported on first use (see contextfold._lazy).
_EXPORTS: dict[str, str] = {
    "BlobInfo": ".blobs",
    "BlobStore": ".blobs",
    "CacheConfig": "._cache",
    "DEFAULT_CLEAR_AT_LEAST": ".masking",
    "DEFAULT_GREP_MATCHES": ".retrieval",
    "DEFAULT_KEEP_TOOL_IO_PAIRS": ".masking",
    "DEFAULT_MAX_LINE_LENGTH": "._cache",
    "DEFAULT_MAX_MESSAGE_BYTES": "._cache",
    "DEFAULT_READ_LIMIT": ".retrieval",
    "GREP_TOOL": ".retrieval",
    "GcResult": "._cache",
    "GrepMatch": ".retrieval",
    "GrepResult": ".retrieval",
    "MaskResult": ".masking",
    "OWNER_INFIX": ".owners",
    "READ_TOOL": ".retrieval",
    "REF_PATTERN": ".refs",
    "RETRIEVAL_TOOL_NAMES": ".retrieval",
    "ReadResult": ".retrieval",
    "Retention": ".owners",
    "StoredOutput": ".owners",
    "ToolOutputCache": "._cache",
    "ToolOutputRef": ".refs",
    "build_line_index": "._line_index",
    "count_lines": "._line_index",
    "delete_output": ".owners",
    "execute_tool_call": ".retrieval",
    "grep_refs": ".retrieval",
    "is_ref_id": ".refs",
    "load_claims": ".owners",
    "mask_tool_outputs": ".masking",
    "masked_placeholder": ".masking",
    "owner_key": ".owners",
    "owner_tag": ".owners",
    "parse_owner_key": ".owners",
    "read_claim": ".owners",
    "read_lines": ".retrieval",
    "ref_id_for": ".refs",
    "referenced_refs": "._cache",
    "retrieval_tool_schemas": ".retrieval",
    "survey": ".owners",
    "tool_output_tokens": ".masking",
    "write_claim": ".owners",
}
__all__ = [
    "DEFAULT_CLEAR_AT_LEAST", "DEFAULT_GREP_MATCHES", "DEFAULT_KEEP_TOOL_IO_PAIRS", "DEFAULT_MAX_LINE_LENGTH",
    "DEFAULT_MAX_MESSAGE_BYTES", "DEFAULT_READ_LIMIT", "GREP_TOOL", "OWNER_INFIX", "READ_TOOL", "REF_PATTERN",
    "RETRIEVAL_TOOL_NAMES", "BlobInfo", "BlobStore", "CacheConfig", "GcResult", "GrepMatch", "GrepResult",
    "MaskResult", "ReadResult", "Retention", "StoredOutput", "ToolOutputCache", "ToolOutputRef", "build_line_index",
    "count_lines", "delete_output", "execute_tool_call", "grep_refs", "is_ref_id", "load_claims", "mask_tool_outputs",
    "masked_placeholder", "owner_key", "owner_tag", "parse_owner_key", "read_claim", "read_lines", "ref_id_for",
    "referenced_refs", "retrieval_tool_schemas", "survey", "tool_output_tokens", "write_claim",
]
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
