"""Superseded reads: a read shown again (same or wider range) or edited later is the stale copy."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.messages import Message, ToolCall
from contextfold.steering import ResourceRule, ToolPolicies, ToolPolicy, access_of, superseded_reads

DEFAULTS = ToolPolicies()


def conversation(*calls: tuple[str, dict[str, object]], cut: frozenset[int] = frozenset(),
                 outputs: dict[int, str] | None = None) -> list[Message]:
    """One assistant message per call, each answered; the results whose call number is in ``cut`` were truncated."""
    out = [Message.system("agent"), Message.user("fix it")]
    for n, (name, arguments) in enumerate(calls):
        out.append(Message.assistant(f"step {n}", (ToolCall(f"c{n}", name, json.dumps(arguments)),)))
        result = Message.tool(f"c{n}", (outputs or {}).get(n, f"output {n}"))
        out.append(result.with_meta(kind="truncated", ref="tout_0000000000000000") if n in cut else result)
    return out


def result_of(n: int) -> int:
    return 3 + 2 * n


def call_of(n: int) -> int:
    return 2 + 2 * n


def test_a_wider_view_of_the_same_file_supersedes_the_narrower_one() -> None:
    view = conversation(
        ("str_replace_editor", {"command": "view", "path": "/repo/a.py", "view_range": [10, 40]}),
        ("str_replace_editor", {"command": "view", "path": "/repo/b.py"}),
        ("str_replace_editor", {"command": "view", "path": "/repo/a.py", "view_range": "[1, 100]"}),
    )
    assert superseded_reads(view, DEFAULTS.resource_rule) == {result_of(0): call_of(2)}


def test_a_narrower_or_disjoint_read_supersedes_nothing() -> None:
    view = conversation(
        ("read_file", {"path": "a.py", "start_line": 1, "end_line": 100}),
        ("read_file", {"path": "a.py", "start_line": 10, "end_line": 20}),
        ("read_file", {"path": "a.py", "start_line": 200, "end_line": 300}),
    )
    assert superseded_reads(view, DEFAULTS.resource_rule) == {}


def test_the_same_range_again_supersedes_and_a_range_to_the_end_covers_the_tail() -> None:
    view = conversation(
        ("view", {"path": "./src/a.py", "view_range": [50, 60]}),
        ("view", {"path": "src/a.py", "view_range": [50, 60]}),
        ("view", {"path": "src/a.py", "view_range": [40, -1]}),
    )
    assert superseded_reads(view, DEFAULTS.resource_rule) == {result_of(0): call_of(1), result_of(1): call_of(2)}


def test_an_edit_after_reading_supersedes_the_reads_that_show_what_it_changed() -> None:
    outputs = {0: "     1\timport os\n     2\tdef main():\n     3\t    return 1\n",
               1: "   200\tdef helper():\n   201\t    pass\n",
               3: "     1\timport os\n"}
    view = conversation(
        ("Read", {"file_path": "/w/x.py", "offset": 1, "limit": 50}),
        ("Read", {"file_path": "/w/x.py", "offset": 200, "limit": 2}),
        ("str_replace_editor", {"command": "str_replace", "path": "/w/x.py",
                                "old_str": "\ndef main():\n    return 1", "new_str": "def main():\n    return 2"}),
        ("Read", {"file_path": "/w/x.py", "offset": 1, "limit": 10}),
        ("write_file", {"path": "/w/x.py", "content": "print(1)"}),
        outputs=outputs,
    )
    # The str_replace changed lines the first read shows (its old_str is there), not the helper read at line 200
    # (Read's file_path and str_replace_editor's path name the same file). The whole-file write supersedes every
    # read still current.
    assert superseded_reads(view, DEFAULTS.resource_rule) == {result_of(0): call_of(2), result_of(1): call_of(4),
                                                              result_of(3): call_of(4)}


def test_an_insert_supersedes_the_reads_whose_range_holds_its_line() -> None:
    view = conversation(
        ("view", {"path": "m.py", "view_range": [1, 30]}),
        ("view", {"path": "m.py", "view_range": [100, 130]}),
        ("str_replace_editor", {"command": "insert", "path": "m.py", "insert_line": 120, "new_str": "x = 1"}),
    )
    assert superseded_reads(view, DEFAULTS.resource_rule) == {result_of(1): call_of(2)}


def test_a_cut_newer_read_covers_only_an_identical_range() -> None:
    # The whole file was cut at write time to head and tail: lines 300-320 shown earlier may not be in its view.
    view = conversation(
        ("cat", {"path": "big.log", "start_line": 300, "end_line": 320}),
        ("cat", {"path": "big.log"}),
        ("cat", {"path": "big.log"}),
        cut=frozenset({1, 2}),
    )
    assert superseded_reads(view, DEFAULTS.resource_rule) == {result_of(1): call_of(2)}


def test_unknown_tools_and_calls_without_a_resource_are_left_alone() -> None:
    view = conversation(
        ("bash", {"command": "cat a.py"}),
        ("read_file", {}),
        ("read_file", {"path": "a.py"}),
        ("bash", {"command": "cat a.py"}),
        ("str_replace_editor", {"command": "undo_everything", "path": "a.py"}),
    )
    assert superseded_reads(view, DEFAULTS.resource_rule) == {}


def test_a_tau_bench_reservation_rule_from_the_configuration() -> None:
    rules = ToolPolicies({
        "get_reservation_details": ToolPolicy(resource=ResourceRule(key=("reservation_id",))),
        "update_reservation_*": ToolPolicy(resource=ResourceRule(key=("reservation_id",), access="edit")),
        "cancel_reservation": ToolPolicy(resource=ResourceRule(key=("reservation_id",), access="edit")),
    })
    view = conversation(
        ("get_reservation_details", {"reservation_id": "ZFA04Y"}),
        ("get_reservation_details", {"reservation_id": "8JX2WO"}),
        ("update_reservation_flights", {"reservation_id": "ZFA04Y", "cabin": "economy", "flights": []}),
        ("get_reservation_details", {"reservation_id": "8JX2WO"}),
    )
    assert superseded_reads(view, rules.resource_rule) == {result_of(0): call_of(2), result_of(1): call_of(3)}
    # Without the rules (the defaults know file tools only) nothing is superseded.
    assert superseded_reads(view, DEFAULTS.resource_rule) == {}


def test_parallel_calls_are_taken_left_to_right() -> None:
    calls = (ToolCall("a", "read_file", '{"path": "x"}'), ToolCall("b", "read_file", '{"path": "x"}'))
    view = [Message.user("go"), Message.assistant("", calls), Message.tool("a", "x v1"), Message.tool("b", "x v2")]
    assert superseded_reads(view, DEFAULTS.resource_rule) == {2: 1}


def test_ranges_written_every_way_models_write_them() -> None:
    rule = DEFAULTS.resource_rule("str_replace_editor")
    assert rule is not None
    for written in ([5, 9], "[5, 9]", "5-9", "5:9", (5, 9)):
        access = access_of(rule, {"command": "view", "path": "p", "view_range": written})
        assert access is not None and (access.first, access.last, access.exact) == (5, 9, None), written
    odd = access_of(rule, {"command": "view", "path": "p", "view_range": "lines five to nine"})
    assert odd is not None and odd.exact is not None
    assert access_of(rule, {"command": "create", "path": "p", "file_text": "x"}) == access_of(
        rule, {"command": "insert", "path": "p"})
    assert access_of(rule, "not a mapping") is None


reads = st.lists(st.tuples(st.sampled_from(["a", "b"]), st.one_of(st.none(), st.tuples(st.integers(1, 30),
                                                                                        st.integers(1, 30))),
                           st.booleans()), max_size=12)


@settings(max_examples=100, deadline=None)
@given(reads)
def test_a_superseded_read_always_has_a_later_covering_read_or_edit(steps: list[tuple[str, object, bool]]) -> None:
    calls = []
    for path, span, edit in steps:
        if edit:
            calls.append(("write_file", {"path": path, "content": "x"}))
        elif span is None:
            calls.append(("read_file", {"path": path}))
        else:
            lo, hi = sorted(span)  # type: ignore[arg-type]
            calls.append(("read_file", {"path": path, "start_line": lo, "end_line": hi}))
    view = conversation(*calls)
    found = superseded_reads(view, DEFAULTS.resource_rule)
    for result, by in found.items():
        n, m = (result - 3) // 2, (by - 2) // 2
        assert m > n
        older, newer = calls[n], calls[m]
        assert older[0] == "read_file" and newer[1]["path"] == older[1]["path"]
        if newer[0] == "read_file":
            lo_old, hi_old = older[1].get("start_line", 1), older[1].get("end_line", 10**9)
            lo_new, hi_new = newer[1].get("start_line", 1), newer[1].get("end_line", 10**9)
            assert lo_new <= lo_old and hi_new >= hi_old  # type: ignore[operator]
    # And every read that a later read covers or an edit follows is found.
    for n, (name, args) in enumerate(calls):
        if name != "read_file":
            continue
        later = calls[n + 1:]
        edited = any(c[0] == "write_file" and c[1]["path"] == args["path"] for c in later)
        lo, hi = args.get("start_line", 1), args.get("end_line", 10**9)
        covered = any(c[0] == "read_file" and c[1]["path"] == args["path"] and c[1].get("start_line", 1) <= lo
                      and c[1].get("end_line", 10**9) >= hi for c in later)
        assert (result_of(n) in found) == (edited or covered), (n, calls)


def test_the_access_memo_holds_a_bounded_size_of_arguments() -> None:
    # Review of e857db0: the memo of each call's access was bounded by entries only (8,192), and keeps its raw
    # arguments: an edit tool's calls carry whole files, so a long-lived process (a fleet worker, the proxy) kept
    # hundreds of MB of closed sessions' arguments. It holds at most _ACCESS_MEMO_CHARS characters of them.
    from contextfold.steering import resources

    resources._access_memo.clear()
    resources._access_memo_chars = 0
    body = "x" * 20_000
    for n in range(600):  # (12 MB of distinct arguments, far fewer calls than the entry bound)
        raw = json.dumps({"path": f"/srv/f{n}.py", "file_text": body})
        assert resources._access_of_call(resources.FILE_READ, raw) == resources.access_of(
            resources.FILE_READ, json.loads(raw))
    held = sum(len(raw) for _, raw in resources._access_memo)
    assert 0 < held <= resources._ACCESS_MEMO_CHARS
    raw = json.dumps({"path": "/srv/again.py"})
    first = resources._access_of_call(resources.FILE_READ, raw)
    assert resources._access_of_call(resources.FILE_READ, raw) is first  # (still remembered)


@settings(max_examples=60, deadline=None)
@given(reads, st.lists(st.integers(0, 12), max_size=3), st.integers(0, 12))
def test_the_fold_taken_on_in_pieces_finds_what_reading_the_whole_view_finds(
        steps: list[tuple[str, object, bool]], cuts: list[int], split: int) -> None:
    # The masking keeps the fold over the view's prefix and takes a copy of it on over the pairs after (issue 22).
    from contextfold.pairing import pair_list
    from contextfold.steering.resources import SupersededFold

    calls: list[tuple[str, dict[str, object]]] = []
    for path, span, edit in steps:
        if edit:
            calls.append(("write_file", {"path": path, "content": "x"}))
        elif span is None:
            calls.append(("read_file", {"path": path}))
        else:
            lo, hi = sorted(span)  # type: ignore[arg-type]
            calls.append(("read_file", {"path": path, "start_line": lo, "end_line": hi}))
    view = conversation(*calls, cut=frozenset(cuts))
    pairs = pair_list(view)
    at = min(split, len(pairs))
    fold = SupersededFold()
    fold.read(view, DEFAULTS.resource_rule, pairs[:at])
    kept = dict(fold.out)
    whole = fold.copy()
    whole.read(view, DEFAULTS.resource_rule, pairs[at:])
    assert whole.out == superseded_reads(view, DEFAULTS.resource_rule)
    assert whole.pairs == len(pairs)
    assert fold.out == kept and fold.pairs == at  # (the copy went on alone)
