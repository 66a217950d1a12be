"""Per-tool policies: resolved by name or glob, read from Python, YAML and the environment, applied by the manager."""

from __future__ import annotations

import json
from enum import IntEnum
from pathlib import Path

import pytest

from contextfold.compaction import Policy
from contextfold.config import load_settings
from contextfold.errors import ConfigError
from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.steering import ResolvedToolPolicy, ResourceRule, ToolPolicies, ToolPolicy, parse_tool_policies
from contextfold.telemetry import RecordingTelemetry

LINE = "2024-05-01 12:00:00 INFO worker-7 processed batch 4411 in 35 ms (queue depth 12)\n"


def test_globs_apply_in_order_and_later_entries_override_what_they_set() -> None:
    rules = ToolPolicies({
        "*": ToolPolicy(mask_after_turns=10),
        "read_*": ToolPolicy(max_tokens=4_000, mask_after_turns=3),
        "read_secrets": ToolPolicy(never_mask=True),
    })
    assert rules.for_tool("bash") == ResolvedToolPolicy(mask_after_turns=10)
    assert rules.for_tool("read_logs") == ResolvedToolPolicy(max_tokens=4_000, mask_after_turns=3)
    assert rules.for_tool("read_secrets") == ResolvedToolPolicy(max_tokens=4_000, mask_after_turns=3,
                                                                never_mask=True)
    assert not rules.for_tool("read_secrets").maskable
    # A name without glob characters matches itself only; the built-in file rules come first.
    assert ToolPolicies({"read": ToolPolicy(max_tokens=9)}).for_tool("read_file").max_tokens is None
    assert rules.for_tool("read_file").resource is not None and rules.for_tool("read_file").max_tokens == 4_000


def test_protected_is_keep_whole_never_mask_and_no_summary() -> None:
    resolved = ToolPolicies({"manage_todo_list": ToolPolicy(protected=True)}).for_tool("manage_todo_list")
    assert (resolved.keep_whole, resolved.never_mask, resolved.summarize) == (True, True, False)


def test_entries_from_a_mapping_a_list_or_json_text() -> None:
    expected = {"bash": ToolPolicy(mask_after_turns=2), "get_*": ToolPolicy(
        resource=ResourceRule(key=("reservation_id",)))}
    assert parse_tool_policies({"bash": {"mask_after_turns": 2}, "get_*": {"resource": {"key": "reservation_id"}}}) \
        == expected
    assert parse_tool_policies([{"tool": "bash", "mask_after_turns": 2},
                                {"tool": "get_*", "resource": {"key": ["reservation_id"]}}]) == expected
    assert parse_tool_policies(json.dumps({"bash": {"mask_after_turns": 2},
                                           "get_*": {"resource": {"key": "reservation_id"}}})) == expected


@pytest.mark.parametrize(("value", "message"), [
    ({"bash": {"mask_after": 2}}, "bash.mask_after: unknown setting"),
    ({"bash": {"max_tokens": 0}}, "bash.max_tokens: Input should be greater than 0"),
    ({"bash": "never"}, "bash: settings must be a mapping"),
    ({"": {"never_mask": True}}, "must be a non-empty string"),
    ({"x": {"resource": {"key": []}}}, "x.resource.key: name at least one argument"),
    ({"x": {"resource": {"key": "path", "command": "cmd"}}}, "needs the values that read"),
    ([{"mask_after_turns": 1}], "entry 0 must be a mapping with a 'tool'"),
    ("{not json", "must be a JSON object"),
])
def test_bad_entries_name_the_tool_and_the_field(value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_tool_policies(value)


def test_yaml_and_environment_reach_the_policy(tmp_path: Path) -> None:
    path = tmp_path / "contextfold.yaml"
    path.write_text("policy:\n  tools:\n    bash: {mask_after_turns: 3}\n    'read_*':\n      max_tokens: 2000\n"
                    "      resource: {key: path, start: start_line, end: end_line}\n")
    policy = load_settings(path, env={}).policy_object()
    assert policy.tools["bash"] == ToolPolicy(mask_after_turns=3)
    assert policy.tools["read_*"].resource == ResourceRule(key=("path",), start=("start_line",), end=("end_line",))
    nested = load_settings(env={"CONTEXTFOLD_POLICY__TOOLS": '{"screenshot": {"keep_whole": true}}'})
    assert nested.policy_object().tools == {"screenshot": ToolPolicy(keep_whole=True)}
    flat = load_settings(env={"CONTEXTFOLD_TOOLS": '[{"tool": "todo_*", "protected": true}]'})
    assert flat.policy_object().tools == {"todo_*": ToolPolicy(protected=True)}
    # The environment merges into the file key by key, like every settings mapping.
    both = load_settings(path, env={"CONTEXTFOLD_POLICY__TOOLS": '{"bash": {"never_mask": true}}'})
    assert both.policy_object().tools["bash"] == ToolPolicy(mask_after_turns=3, never_mask=True)
    assert both.policy_object().tools["read_*"].max_tokens == 2000


def test_a_bad_environment_value_names_the_variable_and_the_field() -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(env={"CONTEXTFOLD_POLICY__TOOLS": '{"bash": {"mask_after_turns": -1}}'})
    text = str(caught.value)
    assert "CONTEXTFOLD_POLICY__TOOLS" in text and "policy.tools" in text and "bash.mask_after_turns" in text


# -- the manager applies them ------------------------------------------------------------------------------------
def manager(**policy: object) -> ContextManager:
    return ContextManager("gpt-4o", max_context_tokens=16_000, store="memory", archive="memory", session_id="tp",
                          policy=policy, telemetry=RecordingTelemetry())


def call(i: int, name: str, **arguments: object) -> Message:
    return Message.assistant(f"step {i}", [ToolCall(f"c{i}", name, json.dumps(arguments))])


def test_a_per_tool_write_time_cap_and_keep_whole() -> None:
    cm = manager(tools={"bash": {"max_tokens": 300}, "screenshot_text": {"keep_whole": True}})
    big = LINE * 120  # ~2,800 tokens: under the session-wide cap of 16K (2,040 / 1.2 tokens) only for some tools
    cm.add([Message.user("go"), call(1, "bash", command="tail log"), Message.tool("c1", big),
            call(2, "screenshot_text"), Message.tool("c2", big), call(3, "other"), Message.tool("c3", big)])
    view = cm.messages()
    bash, shot, other = view[2], view[4], view[6]
    assert bash.kind == "truncated" and cm.counter.count_message(bash) <= 300
    assert shot.kind is None and shot.text == big  # kept whole, although over the session-wide cap
    assert other.kind == "truncated" and cm.counter.count_message(other) > 300  # the session-wide cap
    assert cm.cache is not None and cm.cache.get(str(bash.meta["ref"])) == big


def test_never_mask_and_mask_after_turns_steer_masking() -> None:
    cm = manager(keep_tool_io_pairs=1, clear_at_least=0,
                 tools={"search_docs": {"never_mask": True}, "bash": {"mask_after_turns": 2}})
    output = LINE * 25  # ~600 tokens each
    cm.add([Message.user("go"), call(1, "search_docs", q="api"), Message.tool("c1", output),
            call(2, "bash", command="ls"), Message.tool("c2", output + "2")])
    # One model turn after the bash output: it is still inside its two turns, so nothing may be masked yet.
    cm.add([call(3, "other"), Message.tool("c3", output + "3")])
    cm.prepare()
    assert [m.kind for m in cm.messages() if m.role == "tool"] == [None, None, None]
    # Two turns after it the bash output is due: masked on its own (it frees more than clear_at_least = 0) ...
    cm.add([call(4, "other"), Message.tool("c4", "short")])
    cm.prepare()
    kinds = {m.tool_call_id: m.kind for m in cm.messages() if m.role == "tool"}
    assert kinds == {"c1": None, "c2": "masked", "c3": None, "c4": None}
    # ... and when the tool outputs must shrink, never_mask holds whatever the pressure.
    cm.add([call(5, "other"), Message.tool("c5", LINE * 400)])
    cm.prepare()
    kinds = {m.tool_call_id: m.kind for m in cm.messages() if m.role == "tool"}
    assert kinds["c1"] is None


def test_summarize_false_keeps_a_tool_verbatim_through_compaction() -> None:
    cm = manager(tools={"record_decision": {"summarize": False}})
    cm.add([Message.user("plan the migration"), call(1, "record_decision", text="use blue-green"),
            Message.tool("c1", "decision 1 recorded: blue-green deploy, rollback window 30 min")])
    for i in range(2, 30):
        cm.add([call(i, "bash", command=f"step {i}"), Message.tool(f"c{i}", f"ran step {i} " + "ok " * 200)])
    cm.compact()
    texts = [m.text for m in cm.messages()]
    assert "decision 1 recorded: blue-green deploy, rollback window 30 min" in texts
    assert not any("ran step 2 " in t for t in texts)  # the others were summarized
    # Without the rule the decision is summarized like the rest.
    plain = manager()
    plain.add([Message.user("plan the migration"), call(1, "record_decision", text="use blue-green"),
               Message.tool("c1", "decision 1 recorded: blue-green deploy, rollback window 30 min")])
    for i in range(2, 30):
        plain.add([call(i, "bash", command=f"step {i}"), Message.tool(f"c{i}", f"ran step {i} " + "ok " * 200)])
    plain.compact()
    assert "decision 1 recorded: blue-green deploy, rollback window 30 min" not in [m.text for m in plain.messages()]


def test_policy_objects_round_trip_through_json() -> None:
    policy = Policy(tools={"bash": {"mask_after_turns": 2}, "get_*": {"resource": {"key": "id", "access": "edit"}}},
                    context_status="changes")
    assert Policy.model_validate(json.loads(policy.model_dump_json())) == policy


@pytest.mark.parametrize(("build", "message"), [
    (lambda: ToolPolicy(max_tokens=0), "max_tokens: Input should be greater than 0"),
    (lambda: ToolPolicy(mask_after_turns=-1), "mask_after_turns: Input should be greater than or equal to 0"),
    (lambda: ToolPolicy(never_mask="maybe"), "never_mask: Input should be a valid boolean"),
    (lambda: ToolPolicy(resource={"key": "id", "acces": "edit"}), "resource.acces: unknown setting"),
    (lambda: ResourceRule(key=()), "key: name at least one argument"),
    (lambda: ResourceRule(key="path", access="write"), "access: Input should be 'read' or 'edit'"),
    (lambda: ResourceRule(key=("path", 3)), "key: Input should be a name or a list of names"),
])
def test_rules_built_in_python_are_checked_too(build: object, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        build()  # type: ignore[operator]


def test_settings_written_as_text_or_floats_read_as_pydantic_reads_them() -> None:
    assert parse_tool_policies({"bash": {"max_tokens": "4000", "mask_after_turns": 2.0, "never_mask": "yes",
                                         "summarize": "off"}}) == {
        "bash": ToolPolicy(max_tokens=4_000, mask_after_turns=2, never_mask=True, summarize=False)}
    with pytest.raises(ValueError, match=r"bash\.max_tokens: Input should be a valid integer"):
        parse_tool_policies({"bash": {"max_tokens": 2.5}})


@pytest.mark.parametrize("text", ["²", "٣", "4²", "9" * 5_000, "1" * 19, "4_000", "0x10", "", "+"])
def test_a_number_as_text_is_ascii_digits_or_the_field_is_named(text: str) -> None:
    # (str.isdigit() takes superscripts and other scripts' digits, which int() refuses or reads; thousands of digits
    # make int() refuse the string, with Python's own message)
    with pytest.raises(ValueError, match=r"^a\.max_tokens: Input should be a valid integer$"):
        parse_tool_policies({"a": {"max_tokens": text}})
    with pytest.raises(ValueError, match=r"^mask_after_turns: Input should be a valid integer$"):
        ToolPolicy(mask_after_turns=text)  # type: ignore[arg-type]


def test_a_number_as_text_may_have_a_sign_and_surrounding_spaces() -> None:
    assert parse_tool_policies({"a": {"max_tokens": " +4000 ", "mask_after_turns": "-0"}}) == {
        "a": ToolPolicy(max_tokens=4_000, mask_after_turns=0)}
    assert ToolPolicy(max_tokens="9" * 18).max_tokens == 999_999_999_999_999_999  # type: ignore[arg-type]
    assert type(ToolPolicy(max_tokens=IntEnum("Size", {"LARGE": 4000}).LARGE).max_tokens) is int


def test_a_rule_given_one_name_or_a_mapping_is_the_rule_of_a_tuple() -> None:
    assert ResourceRule(key="path", range="view_range") == ResourceRule(key=("path",), range=("view_range",))  # type: ignore[arg-type]
    assert ToolPolicy(resource={"key": "id"}).resource == ResourceRule(key=("id",))  # type: ignore[arg-type]
