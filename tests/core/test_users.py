"""The users registry, the scripted user's file, the LLM user's markers, and the user config."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from modulo import components
from modulo.benchmark import Benchmark
from modulo.errors import ConfigError
from modulo.testing import ScriptedModel
from modulo.types import Problem, ProblemUpdate
from modulo.users import User, UserContext, updates_from
from modulo.users.llm import LLMUser, read_markers
from modulo.users.scripted import ScriptedUser

from . import toy

PROBLEM = Problem(
    id="p1",
    benchmark="toy",
    query="Pick 2 digits summing to 5.",
    hidden={"budget": "At most 300 dollars.", "room": {"text": "Room B only.", "add": {"room": "B"}}},
)


def _answer(user: User, question: str, turn: int = 0, problem: Problem = PROBLEM) -> tuple[str, object]:
    reply = asyncio.run(user.answer(problem, question, UserContext(turn=turn)))
    return reply.answer.text, reply.answer


def test_registry_lists_and_loads_the_built_in_users() -> None:
    assert {"scripted", "llm"} <= set(components.users.names())
    assert components.users.get("scripted") is ScriptedUser and components.users.get("llm") is LLMUser


def test_scripted_user_answers_by_pattern_turn_reveal_and_default(tmp_path: Path) -> None:
    file = tmp_path / "user.yaml"
    file.write_text(
        "default: Nothing more.\n"
        "answers:\n"
        "  - {turn: 2, answer: At turn two.}\n"
        "  - {match: 'budget|cost', reveal: budget}\n"
        "  - {match: room, reveal: room}\n"
        "  - {match: 'sum', answer: Five., unnecessary: true}\n"
        "  - {match: colour, answer: Blue., add: {colour: blue}}\n"
        "  - {match: floor, answer: Second., add: {floor: 2}, text: The second floor only.}\n"
        "updates:\n"
        "  - {after: 1, add: {target: 7}, text: Now 7.}\n"
        "problems:\n"
        "  p1: {answers: [{match: weather, answer: Sunny.}]}\n",
        encoding="utf-8",
    )
    user = ScriptedUser(file=str(file))
    assert _answer(user, "What is the budget?")[0] == "At most 300 dollars."
    text, answer = _answer(user, "Which ROOM?")
    assert text == "Room B only." and answer.update == ProblemUpdate(
        add={"room": "B"}, text="Room B only.", source="user"
    )  # type: ignore[attr-defined]
    assert answer.revealed == ["room"]  # type: ignore[attr-defined]
    text, answer = _answer(user, "What should they sum to?")
    assert text == "Five." and answer.unnecessary is True  # type: ignore[attr-defined]
    assert _answer(user, "What is the budget?", turn=2)[0] == "At turn two."
    assert _answer(user, "How is the weather?")[0] == "Sunny."  # the problem's own entries first
    assert _answer(user, "Favourite colour?")[1].update.add == {"colour": "blue"}  # type: ignore[attr-defined]
    told = _answer(user, "Which floor?")[1].update  # type: ignore[attr-defined]
    assert told == ProblemUpdate(add={"floor": 2}, text="The second floor only.", source="user")
    assert _answer(user, "Anything else?")[0] == "Nothing more."
    # a problem without the hidden item gets the default, not a crash
    assert _answer(user, "budget?", problem=PROBLEM.model_copy(update={"hidden": {}, "id": "p2"}))[0] == "Nothing more."
    assert user.scheduled(PROBLEM) == [ProblemUpdate(after=1, add={"target": 7}, text="Now 7.", source="user")]


@pytest.mark.parametrize(
    ("script", "message"),
    [
        ({"answers": [{"match": "x"}]}, "give 'answer'"),
        ({"answers": [{"match": "x", "answr": "y"}]}, "unknown key"),
        ({"answers": [{"match": "x", "reveal": "room", "add": {"room": "A"}}]}, "'add' beside 'reveal'"),
        ({"answers": [{"match": "x", "answer": "y", "text": "z"}]}, "has no 'add'"),
        ({"answers": [{"match": "(", "answer": "y"}]}, "not a regular expression"),
        ({"answers": [{"turn": -1, "answer": "y"}]}, "turn must be"),
        ({"updates": [{"add": {"a": 1}}]}, "'after'"),
        ({"updates": [{"after": 1}]}, "changes nothing"),
        ({"updates": [{"after": 1, "ad": {}}]}, "unknown key"),
        ({"answer": []}, "unknown key"),
    ],
)
def test_scripted_user_refuses_a_bad_script(script: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ScriptedUser(script=script)


def test_scripted_user_file_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        ScriptedUser(file=str(tmp_path / "missing.yaml"))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid JSON"):
        ScriptedUser(file=str(bad))
    with pytest.raises(ConfigError, match=r"user\.file"):
        ScriptedUser()


def test_updates_from_config_dicts() -> None:
    got = updates_from([{"after": 2, "add": {"x": 1}, "text": "x is 1"}], "user.updates")
    assert got == [ProblemUpdate(after=2, add={"x": 1}, text="x is 1", source="config")]
    with pytest.raises(ConfigError, match=r"user.updates\[0\].after"):
        updates_from([{"after": "soon", "add": {"x": 1}}], "user.updates")


@pytest.mark.parametrize("after", [True, False, "2", 1.0])
def test_an_update_after_that_is_not_an_integer_turn_is_refused(after: object) -> None:
    # pydantic alone would schedule `after: true` (YAML's yes/on) after turn 1 and "2" after turn 2
    with pytest.raises(ConfigError, match=r"user.updates\[0\].after must be an integer"):
        updates_from([{"after": after, "add": {"x": 1}}], "user.updates")


def test_llm_user_markers() -> None:
    assert read_markers("[ALREADY STATED] Five, as I said. [REVEALED: none]") == ("Five, as I said.", True, [])
    assert read_markers("Room B. [REVEALED: room, budget]") == ("Room B.", False, ["room", "budget"])
    assert read_markers("Just text.") == ("Just text.", False, [])
    assert read_markers("Any slot is fine ...") == ("Any slot is fine ...", False, [])  # no marker: as written


@pytest.mark.parametrize(
    "reply",
    [
        "Room B only. [REVEALED: room].",  # a full stop after the marker
        "[REVEALED: room] Room B only.",
        "Room B only. [revealed: room]\n\nAnything else?",
        "Room B only. [ALREADY STATED] [REVEALED: room]",
    ],
)
def test_llm_user_markers_anywhere_are_read_and_kept_from_the_planner(reply: str) -> None:
    text, _, revealed = read_markers(reply)
    assert revealed == ["room"] and "REVEALED" not in text.upper() and "ALREADY" not in text.upper()
    assert text.startswith("Room B only")
    model = ScriptedModel({"p1": [reply]})
    answer = asyncio.run(
        LLMUser(benchmark=toy.Toy()).answer(PROBLEM, "Which room?", UserContext(0, llm=model.client()))
    )
    assert answer.answer.revealed == ["room"] and answer.answer.update is not None
    assert answer.answer.update.add == {"room": "B"} and answer.answer.text == text


def test_llm_user_answers_through_the_client_with_stage_user() -> None:
    model = ScriptedModel({"p1": ["[ALREADY STATED] Room B only. [REVEALED: room, nonsense]"]})
    user = LLMUser(benchmark=toy.Toy())
    reply = asyncio.run(user.answer(PROBLEM, "Which room?", UserContext(turn=3, llm=model.client())))
    (call,) = reply.calls
    assert call.stage == "user" and model.requests[0].tags["stage"] == "user"
    system = call.messages[0].content
    assert "[room] Room B only." in system and "[budget] At most 300 dollars." in system
    assert call.messages[-1].content == "Which room?"
    answer = reply.answer
    assert answer.text == "Room B only." and answer.unnecessary is True and answer.revealed == ["room"]
    assert answer.update is not None and answer.update.add == {"room": "B"}


def test_default_benchmark_hooks() -> None:
    bench: Benchmark = toy.Toy()
    problem = bench.load("dev")[0]
    updated = bench.apply_update(problem, ProblemUpdate(add={"target": 7}, text="Now 7."))
    assert updated.constraints == {"k": 2, "target": 7} and updated.query.endswith("Update: Now 7.")
    assert problem.constraints["target"] == 5  # the old problem is left as is
    check = bench.check_abstention(problem, "impossible")
    assert check.verified is None and not bench.can_check_abstention
    assert bench.classify_reply("  question: which day?") == ("question", "which day?")
    assert bench.classify_reply("[Unsolved] no such tool") == ("abstain", "no such tool")
    assert bench.classify_reply("[2, 3]") == ("plan", "[2, 3]")
    view = PROBLEM.model_copy(update={"updates": [ProblemUpdate(after=1, text="x")]}).planner_view()
    assert view.hidden == {} and view.updates == []
