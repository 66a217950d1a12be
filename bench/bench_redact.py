"""Redaction rules compared: contextfold's built-in patterns against detect-secrets, on the same two corpora.

Run: ``python bench/bench_redact.py`` (detect-secrets is optional: ``pip install detect-secrets``; without it only
contextfold's figures are printed). The corpora are ``tests/redact_corpus.py``: realistic secrets that must all be
caught (synthetic values in each provider's documented shape) and code and logs that must pass unchanged
(hand-written snippets plus real tool outputs from the shared SWE-agent sessions).

For each detector it prints: secrets caught / leaked, false positives on the code corpus (an entry where anything
was reported), and the time to scan both corpora. detect-secrets is a line-level scanner (made for pre-commit
hooks): it reports the line and the kind, and for several kinds only part of the value (``ghp`` for a GitHub
token), so it is scored twice: "line" counts a secret caught when its line is flagged (enough to block a commit),
"span" when the reported value covers it (what a redactor must know to replace it).
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from redact_corpus import CODE, SECRETS, Code, Secret, shared_code_excerpts

from contextfold.redact import Redactor

# A detector: text -> (1-based line number, the string it reports) for every finding.
Detector = Callable[[str], list[tuple[int, str]]]


def contextfold_detector() -> Detector:
    redactor = Redactor(remember=False)

    def found(text: str) -> list[tuple[int, str]]:
        out: list[tuple[int, str]] = []
        for f in redactor.scan(text):
            first, value = text.count("\n", 0, f.start) + 1, text[f.start : f.end]
            out.extend((first + i, value) for i in range(value.count("\n") + 1))  # every line the finding covers
        return out

    return found


def detect_secrets_detector() -> Detector | None:
    try:
        from detect_secrets import SecretsCollection
        from detect_secrets.settings import default_settings
    except ImportError:
        return None
    folder = Path(tempfile.mkdtemp(prefix="bench-redact-"))

    def found(text: str) -> list[tuple[int, str]]:
        # Its default filters look at the file as a whole (and at the extension), as in a pre-commit scan.
        path = folder / "snippet.txt"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        secrets = SecretsCollection()
        with default_settings():
            secrets.scan_file(str(path))
        return [(s.line_number, s.secret_value or "") for _, s in secrets]

    return found


def _span_caught(value: str, reported: list[tuple[int, str]]) -> bool:
    # Covered when a report holds the value (with context) or is a long part of it (a PEM body line).
    return any(value in r or (len(r) >= 8 and r in value) for _, r in reported)


def _line_caught(text: str, value: str, reported: list[tuple[int, str]]) -> bool:
    start = text.find(value)
    first = text.count("\n", 0, start) + 1
    lines = set(range(first, first + value.count("\n") + 1))
    return any(n in lines for n, _ in reported)


def score(name: str, detect: Detector, secrets: list[Secret], code: list[Code]) -> None:
    start = time.perf_counter()
    reports = [(s, detect(s.text)) for s in secrets]
    span_leaked = [s.label for s, r in reports if not all(_span_caught(v, r) for v in s.values)]
    line_leaked = [s.label for s, r in reports if not all(_line_caught(s.text, v, r) for v in s.values)]
    false_positives = [(c.label, [r for _, r in detect(c.text)]) for c in code]
    false_positives = [(label, found) for label, found in false_positives if found]
    seconds = time.perf_counter() - start
    total = len(secrets)
    print(f"\n{name}")
    print(f"  secrets caught (span): {total - len(span_leaked)}/{total}   leaked: {len(span_leaked)}")
    print(f"  secrets caught (line): {total - len(line_leaked)}/{total}   leaked: {len(line_leaked)}")
    print(f"  code and logs changed (false positives): {len(false_positives)}/{len(code)}")
    print(f"  time for both corpora: {seconds:.2f} s")
    if line_leaked:
        print("  leaked even by line: " + "; ".join(line_leaked))
    for label, found in false_positives[:25]:
        shown = ", ".join(repr(f[:40]) for f in found[:3])
        print(f"  false positive: {label}: {shown}")


def throughput(runs: int = 5) -> None:
    """MB/s of redaction over every message of the shared recorded sessions (what an archive redacts).

    Two paths: ``redact_text`` text by text, and ``redact_messages`` over each session's messages in one batch (the
    bulk path of issue 12, which archiving a transcript takes). CPU time (``time.process_time``), median of ``runs``;
    the scans redactors share are dropped before each run, so no run finds the scans of the one before.
    """
    import json
    import statistics

    from redact_corpus import _SHARED

    from contextfold.messages import Message
    from contextfold.redact import _scans

    texts: list[str] = []
    sessions: list[list[Message]] = []
    for path in sorted(_SHARED.glob("*/*.traj")):
        messages: list[Message] = []
        for message in json.loads(path.read_text(encoding="utf-8")).get("history", []):
            content = message.get("content")
            pieces = [content] if isinstance(content, str) else [b.get("text", "") for b in content or []]
            texts += pieces
            messages.append(Message("user", "\n".join(pieces)))
        sessions.append(messages)
    if not texts:
        return
    size = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)
    text_times, bulk_times = [], []
    changed = 0
    for _ in range(runs):
        _scans._scan_caches.clear()
        redactor = Redactor(remember=False)
        start = time.process_time()
        changed = sum(redactor.redact_text(t) != t for t in texts)
        text_times.append(time.process_time() - start)
        _scans._scan_caches.clear()
        redactor = Redactor(remember=False)
        start = time.process_time()
        for messages in sessions:
            redactor.redact_messages(messages)
        bulk_times.append(time.process_time() - start)
    text_s, bulk_s = statistics.median(text_times), statistics.median(bulk_times)
    print(f"\nthroughput on the shared SWE-agent sessions ({size / 1e6:.1f} MB, CPU time, median of {runs}):")
    print(f"  redact_text:     {text_s:.2f} s = {size / 1e6 / text_s:.1f} MB/s "
          f"({changed} of {len(texts)} texts changed)")
    print(f"  redact_messages: {bulk_s:.2f} s = {size / 1e6 / bulk_s:.1f} MB/s (one batch per session)")


def main() -> None:
    code = [*CODE, *shared_code_excerpts(limit=200)]
    secrets = list(SECRETS)
    print(f"corpora: {len(secrets)} secrets, {len(code)} code and log snippets "
          f"({len(code) - len(CODE)} of them real tool outputs from the shared sessions)")
    score("contextfold built-in patterns", contextfold_detector(), secrets, code)
    throughput()
    other = detect_secrets_detector()
    if other is None:
        print("\ndetect-secrets: not installed (pip install detect-secrets)")
    else:
        score("detect-secrets 1.5 (default plugins and filters)", other, secrets, code)


if __name__ == "__main__":
    main()
