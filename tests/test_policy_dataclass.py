"""The dataclass Policy as users of the pydantic one relied on it: nested in their models, subclassed for team
defaults, pickled by an earlier version, copied and dumped with pydantic's keywords, typed for mypy."""

from __future__ import annotations

import contextlib
import json
import pickle
import subprocess
import sys
import threading
import weakref
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from contextfold.compaction import Policy
from contextfold.compaction import _policy_schema as policy_schema
from contextfold.manager import ContextManager
from contextfold.steering import ResourceRule, ToolPolicy

ROOT = Path(__file__).resolve().parents[1]
# Pickled by contextfold at a9a74c5, when Policy, ToolPolicy and ResourceRule were pydantic models:
#   Policy(trigger_pct=0.7, protected_tools=("todo",),
#          tools={"bash": {"max_tokens": 4000, "resource": {"key": "path", "access": "edit"}}})
BASE_PICKLE = Path(__file__).parent / "golden" / "pickles" / "policy_a9a74c5.pkl"


class Settings(BaseModel):
    policy: Policy = Policy()


class Lean(Policy):
    """Team defaults: compact earlier, keep fewer turns."""

    trigger_pct: float = 0.7
    keep_recent_turns: int = 2


class WithTeam(Policy):
    team: str = "core"


def _locations(exc: ValidationError) -> list[str]:
    return [".".join(str(part) for part in error["loc"]) for error in exc.errors()]


# -- a Policy field of a pydantic model ------------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "location"), [
    ({"nope": 5}, "policy.nope"),
    ({"strategy": "custom"}, "policy.custom_prompt"),
    ({"trigger_pct": 5}, "policy.trigger_pct"),
    ({"tools": {"a": {"max_tokens": 0}}}, "policy.tools"),
])
def test_a_policy_field_of_a_pydantic_model_is_validated_with_every_check(value: dict[str, Any],
                                                                          location: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Settings(policy=value)
    assert _locations(caught.value) == [location]  # (one error: none about the value not being a Policy)


def test_a_policy_field_round_trips_through_json_and_has_the_policy_schema() -> None:
    settings = Settings(policy={"trigger_pct": 0.5, "tools": {"a": {"max_tokens": "3"}}})
    assert type(settings.policy) is Policy
    assert settings.policy.tools == {"a": ToolPolicy(max_tokens=3)}
    assert settings.policy.model_fields_set == {"trigger_pct", "tools"}
    assert Settings.model_validate_json(settings.model_dump_json()) == settings
    assert "Policy" in Settings.model_json_schema(mode="serialization")["$defs"]
    assert settings.model_dump()["policy"] == settings.policy.model_dump()
    given = Lean()
    assert Settings(policy=given).policy is given  # (a policy, a subclass's too, is kept as it is)
    trigger = Settings.model_json_schema()["$defs"]["Policy"]["properties"]["trigger_pct"]
    assert (trigger["exclusiveMinimum"], trigger["maximum"], trigger["default"]) == (0, 1, 0.85)


# -- subclasses ----------------------------------------------------------------------------------------------------

def test_a_subclass_sets_its_own_defaults_and_keeps_the_ranges() -> None:
    assert (Lean().trigger_pct, Lean().keep_recent_turns, Lean().soft_pct) == (0.7, 2, 0.6)
    made = Lean(soft_pct=0.5)
    assert (type(made), made.trigger_pct, made.soft_pct) == (Lean, 0.7, 0.5)
    assert type(Lean.model_validate({"soft_pct": 0.5})) is Lean and type(Lean.quality()) is Lean
    assert Lean().model_dump()["trigger_pct"] == 0.7 and Lean() != Policy()
    with pytest.raises(ValidationError) as caught:
        Lean(trigger_pct=2)
    assert _locations(caught.value) == ["trigger_pct"]
    assert ContextManager(model="gpt-4o", store="memory", archive="memory", policy=Lean()).budgets.hard == 89_600
    assert pickle.loads(pickle.dumps(Lean(soft_pct=0.5))) == Lean(soft_pct=0.5)


def test_a_subclass_adds_fields_and_its_defaults_are_checked() -> None:
    assert (WithTeam().team, WithTeam(team="infra").team) == ("core", "infra")
    assert WithTeam(team="infra").model_dump(include={"team"}) == {"team": "infra"}
    with pytest.raises(ValidationError):
        WithTeam(nope=1)

    class OutOfRange(Policy):
        soft_pct: float = 1.5

    with pytest.raises(ValidationError) as caught:
        OutOfRange(soft_pct=0.5)  # (the first construction gives that field a valid value: the default is checked)
    assert _locations(caught.value) == ["soft_pct"]
    with pytest.raises(ValidationError) as caught:
        OutOfRange()
    assert _locations(caught.value) == ["soft_pct"]

    class Required(Policy):
        team: str

    with pytest.raises(ValidationError) as missing:
        Required()  # type: ignore[call-arg]
    assert _locations(missing.value) == ["team"]
    assert Required(team="a").team == "a"


# -- pickles of the pydantic Policy --------------------------------------------------------------------------------

def test_a_policy_pickled_when_it_was_a_pydantic_model_loads_with_its_values() -> None:
    loaded = pickle.loads(BASE_PICKLE.read_bytes())
    assert loaded == Policy(trigger_pct=0.7, protected_tools=("todo",),
                            tools={"bash": {"max_tokens": 4000, "resource": {"key": "path", "access": "edit"}}})
    assert loaded.tools["bash"] == ToolPolicy(max_tokens=4000, resource=ResourceRule(key=("path",), access="edit"))
    assert loaded.model_fields_set == {"trigger_pct", "protected_tools", "tools"}


class _Pickled:
    """Pickles as a ``kind`` whose state is ``state`` (what another version may have written)."""

    def __init__(self, kind: type, state: object) -> None:
        self.kind, self.state = kind, state

    def __reduce__(self) -> tuple[Any, ...]:
        return object.__new__, (self.kind,), self.state


@pytest.mark.parametrize(("kind", "state", "problem"), [
    (Policy, {"__dict__": {"trigger_pct": 0.7, "nope": 1}, "__pydantic_fields_set__": {"nope"}},
     "unknown field 'nope'"),
    (Policy, {"__dict__": {}, "__other__": 1}, "unknown part '__other__'"),
    (Policy, {"__dict__": {}, "__pydantic_extra__": {"nope": 1}}, "__pydantic_extra__ is not empty"),
    (Policy, ["a"], "its state is a list"),
    (ToolPolicy, {"__dict__": {"max_tokens": 3, "max_token": 4}}, "unknown field 'max_token'"),
    (ResourceRule, {"key": ("path",), "acces": "edit"}, "unknown field 'acces'"),
])
def test_a_pickle_with_fields_this_version_does_not_have_is_refused(kind: type, state: object,
                                                                    problem: str) -> None:
    with pytest.raises(pickle.UnpicklingError, match=f"cannot load a pickled {kind.__name__}: {problem}"):
        pickle.loads(pickle.dumps(_Pickled(kind, state)))


# -- containers, pydantic's keywords, weak references ------------------------------------------------------------

def test_the_callers_dict_is_copied() -> None:
    given: dict[str, Any] = {}
    policy = Policy(tools=given)
    constructed = Policy.model_construct(tools=given)
    given["x"] = 1
    assert policy.tools == {} and constructed.tools == {}


POLICIES = [Policy(), Policy(trigger_pct=0.7, protected_tools=["a"], summary_header="v{version}"),
            Policy(tools={"read_*": {"max_tokens": 400, "resource": {"key": ["path", "file"]}}}, strategy="custom",
                   custom_prompt="Keep the plan.", keep_thinking_turns=3), Lean(context_status="always")]


@pytest.mark.parametrize("policy", POLICIES)
def test_dumps_with_pydantics_keywords_match_the_plain_dump(policy: Policy) -> None:
    for mode in ("python", "json"):
        assert policy.model_dump(mode=mode, round_trip=True) == policy.model_dump(mode=mode)
    assert json.loads(policy.model_dump_json(indent=2)) == json.loads(policy.model_dump_json())
    assert type(policy).model_validate_json(policy.model_dump_json(by_alias=True)) == policy
    assert policy.model_dump(exclude_unset=True) == policy.model_dump(include=policy.model_fields_set)
    assert "tools" not in json.loads(policy.model_dump_json(exclude={"tools"}))


def test_copies_are_validated_keep_the_fields_set_and_deep_copy_when_asked() -> None:
    policy = Policy(trigger_pct=0.7, tools={"a": {"max_tokens": 3}})
    assert policy.model_fields_set == {"trigger_pct", "tools"}
    assert policy.model_dump(exclude_unset=True) == {"trigger_pct": 0.7, "tools": {"a": {
        "max_tokens": 3, "keep_whole": None, "never_mask": None, "mask_after_turns": None, "summarize": None,
        "protected": None, "resource": None}}}
    copied = policy.model_copy(update={"soft_pct": "0.5"})
    assert (copied.soft_pct, copied.trigger_pct, copied.model_fields_set) == (0.5, 0.7,
                                                                             {"trigger_pct", "tools", "soft_pct"})
    for update, location in (({"trigger_pct": 5}, "trigger_pct"), ({"nope": 1}, "nope")):
        with pytest.raises(ValidationError) as caught:
            policy.model_copy(update=update)
        assert _locations(caught.value) == [location]
    deep = policy.model_copy(deep=True)
    assert deep == policy and deep.tools is not policy.tools
    assert Policy.model_json_schema()["properties"]["soft_pct"]["exclusiveMaximum"] == 1


def test_policies_and_tool_policies_take_weak_references() -> None:
    policy, tool = Policy(), ToolPolicy(max_tokens=3)
    assert weakref.ref(policy)() is policy and weakref.ref(tool)() is tool


# -- the model, built once -------------------------------------------------------------------------------------------

def test_threads_making_their_first_policies_at_once_build_the_model_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(policy_schema, "_MODELS", {})  # (as in a process that has validated no policy yet)
    builds: list[str] = []
    # A second build reaching pydantic while the first is in it meets it here; with one build, the wait ends
    # after its timeout (the only wait of this test).
    second_build = threading.Barrier(2, timeout=1.0)
    real_create_model = policy_schema.create_model

    def create_model(name: str, **kwargs: Any) -> Any:
        builds.append(name)
        with contextlib.suppress(threading.BrokenBarrierError):
            second_build.wait()
        return real_create_model(name, **kwargs)

    monkeypatch.setattr(policy_schema, "create_model", create_model)
    start = threading.Barrier(8)
    made: list[Policy] = []

    def make(i: int) -> None:
        start.wait()
        made.append(Policy(soft_pct=0.5 + i / 100))

    threads = [threading.Thread(target=make, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert builds == ["Policy"] and sorted(p.soft_pct for p in made) == [0.5 + i / 100 for i in range(8)]


# -- typing ----------------------------------------------------------------------------------------------------------

def test_mypy_types_the_keywords_of_policy(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    snippet = tmp_path / "uses_policy.py"
    snippet.write_text("from contextfold.compaction import Policy\n\nPolicy(trigger_pct=0.5, strategy='brief')\n"
                       "Policy(nope=1)\nPolicy(trigger_pct='x')\n")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), "--cache-dir",
         str(tmp_path / "cache"), "--no-error-summary", str(snippet)],
        capture_output=True, text=True, cwd=ROOT, env={"MYPYPATH": str(ROOT / "src"), "PATH": ""}, timeout=300)
    errors = [line.split(": error: ")[1] for line in done.stdout.splitlines() if ": error: " in line]
    assert [line.split(":")[1] for line in done.stdout.splitlines() if ": error: " in line] == ["4", "5"]
    assert errors == ['Unexpected keyword argument "nope" for "Policy"  [call-arg]',
                      'Argument "trigger_pct" to "Policy" has incompatible type "str"; expected "float"  [arg-type]']
