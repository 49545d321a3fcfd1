"""The generation half of an iteration keeps its answers while it does less: templates read a row's keys at
once and say what Jinja says, a reply is read as json.loads reads it, and a plan's canonical text is the one
canonical_json writes (a cycle is still told apart from depth)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jinja2
import pytest

from modulo.backprompt import Row
from modulo.canonical import tree_json
from modulo.errors import PromptError
from modulo.prompts import Template, keyed
from modulo.reformulate import NON_FINITE, _whole_json, extract_json, validated
from modulo.types import canonical_json

#: what each template reads of ``f``: attributes a dict's class holds, keys, missing ones, items
SOURCES = [
    "{{ f.feedback }}",
    "{{ f.hint }}",
    "{{ f.items is callable }}|{{ f['items'] }}",
    "{{ f.get('feedback') }}|{{ f.keys() | list | length }}",
    "{{ f.missing is defined }}",
    "{{ f.__class__.__name__ }}",
    "{% for k, v in f.items() %}{{ k }}={{ v }};{% endfor %}",
    "{{ f.nested.deeper }}",
    "{{ f.copy }}",
]
VALUES: list[dict[str, Any]] = [
    {"feedback": "too dear", "hint": None, "items": "x", "nested": {"deeper": 3}},
    {"feedback": "", "nested": {}},
    {"copy": "a key named like a method", "nested": {"deeper": [1]}},
]


def _jinja(source: str, f: Any) -> str:
    """What plain Jinja renders (its own attribute-first lookup), or the error it raises."""
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)
    try:
        return env.from_string(source).render(f=f).strip() + "\n"
    except jinja2.TemplateError as exc:
        return f"error: {exc}"


def _ours(source: str, f: Any) -> str:
    try:
        return Template.from_text("t", source).render(f=f)
    except PromptError as exc:
        return f"error: {str(exc).removeprefix('template t failed to render: ')}"


@pytest.mark.parametrize("source", SOURCES)
def test_a_template_reads_a_dict_or_a_row_as_jinja_does(source: str) -> None:
    for value in VALUES:
        for f in (dict(value), Row(value)):
            assert _ours(source, f) == _jinja(source, f), (source, f)


def test_only_a_dict_without_an_instance_dict_or_its_own_attribute_lookup_can_be_keyed() -> None:
    class Loose(dict[str, Any]):
        pass

    class Custom(dict[str, Any]):
        __slots__ = ()

        def __getattribute__(self, name: str) -> Any:
            return "always"

    for cls in (Loose, Custom, list, object):
        with pytest.raises(TypeError):
            keyed(cls)

    @keyed
    class Slim(Row):  # a row of its own: registered here
        __slots__ = ()

    assert Template.from_text("t", "{{ f.a }}|{{ f.values is callable }}").render(f=Slim(a=1, values=2)) == "1|True\n"


@pytest.mark.parametrize(
    "text",
    ['{"a": 1}', "[1, 2.5, null]", '"s"', "3", "[1] [2]", '{"a": 1} x', "", "\ufeff[1]", "[1", "nul", "1e400",
     "-", "[" * 50 + "]" * 50, '{"a":"\\ud800"}', "9" * 5000],
)  # fmt: skip
def test_a_whole_reply_is_read_as_json_loads_reads_it(text: str) -> None:
    def outcome(read: Any) -> Any:
        try:
            return ("value", read(text))
        except ValueError:
            return ("error",)

    assert outcome(_whole_json) == outcome(json.loads)


def test_extract_json_still_finds_a_value_in_prose_and_fences() -> None:
    assert extract_json("  [1, 2]\n") == [1, 2]
    assert extract_json('Here:\n```json\n{"a": [1]}\n```\nthanks') == {"a": [1]}
    assert extract_json('The plan is {"a": 2} and more') == {"a": 2}


class Anything:
    """A benchmark whose every JSON value is a plan (its canonical text the key it was given)."""

    plan_json_schema = None

    def checked_plan(self, value: Any, key: str | None = None) -> tuple[Any, str]:
        return value, key if key is not None else canonical_json(value)


def test_a_plans_canonical_text_is_canonical_json_and_a_cycle_is_told_apart() -> None:
    plans: list[Any] = [
        [{"b": 1, "a": 'é \u2028 "q"', "c": [1.5, None, True, float("inf")]}],
        {"z": {"y": {"x": []}}},
        [],
        "text",
    ]
    for plan in plans:
        assert tree_json(plan) == canonical_json(plan)
    cyclic: list[Any] = [1]
    cyclic.append(cyclic)
    with pytest.raises(RecursionError):
        tree_json(cyclic)

    out = validated(Anything(), cyclic)  # type: ignore[arg-type]
    assert out.plan is None and out.error is not None and "Circular reference" in out.error
    deep: Any = []
    for _ in range(5000):
        deep = [deep]
    out = validated(Anything(), deep)  # type: ignore[arg-type]
    assert out.error is not None and "nested more than" in out.error
    ok = validated(Anything(), plans[1])  # type: ignore[arg-type]
    assert ok.canonical == canonical_json(plans[1])


def test_a_plan_holding_nan_or_an_infinity_is_a_format_failure_and_names_alone_are_not() -> None:
    """Python's JSON reader accepts NaN, Infinity and 1e999; records (standard JSON) would write them as
    null, so the plan the critics judged would not be the plan recorded: such a plan is refused."""

    for text in ("[1, NaN]", '{"a": {"b": [Infinity]}}', "[-Infinity]", '{"cost": 1e999}', "[-1e400]"):
        out = validated(Anything(), extract_json(text))  # type: ignore[arg-type]
        assert out.plan is None and out.error == NON_FINITE, text
    for text in ('["NaN", "Infinity"]', '{"NaN": "-Infinity", "x": 1.5e300}', '["Nana Cafe", 0.0]'):
        out = validated(Anything(), extract_json(text))  # type: ignore[arg-type]
        assert out.error is None and out.plan == json.loads(text), text
    # a parser's value (not read from JSON text): a tuple, a float key
    for value in ({"a": ("NaN", 1.0, float("inf"))}, {float("nan"): "x"}, [{"b": [[-float("inf")]]}]):
        out = validated(Anything(), value)  # type: ignore[arg-type]
        assert out.plan is None and out.error == NON_FINITE, value


def test_a_reply_is_classified_the_same_whether_its_markers_are_a_tuple_or_a_list() -> None:
    from tests.core.toy import Toy as ToyBenchmark

    class Listed(ToyBenchmark):
        question_markers = ["ASK:", "Question:"]  # type: ignore[assignment]  # noqa: RUF012
        abstain_markers = ["NOPE"]  # type: ignore[assignment]  # noqa: RUF012

    class Tupled(ToyBenchmark):
        question_markers = ("ASK:", "Question:")
        abstain_markers = ("NOPE",)

    class Unmarked(ToyBenchmark):
        question_markers = ()
        abstain_markers = ()

    texts = ["[1, 2]", "  ask: which day?", "QUESTION: x", "nope, cannot", "Nope", "", "\n\nquestion:  y ", "plan"]
    for text in texts:
        assert Listed().classify_reply(text) == Tupled().classify_reply(text), text
        assert Unmarked().classify_reply(text) == ("plan", text)
    assert Tupled().classify_reply("  ask: which day?") == ("question", "which day?")
    assert Tupled().classify_reply("NOPE no tool") == ("abstain", "no tool")


@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")  # a model_copy's off-type values, on purpose
def test_a_requests_members_are_written_once_per_run_and_every_key_is_still_its_own() -> None:
    """The members of an LLM request besides its messages (model, temperature, schema, ...) are the same for a
    run's requests: their text is kept by what JSON would write (type and repr, the schema's identity), so
    that values equal in Python but written apart (0.0 and -0.0, 1 and 1.0 and True) get their own text."""
    import hashlib

    from modulo.canonical import frozen_object
    from modulo.llm.base import _KEY_PARTS, LLMRequest
    from modulo.llm.client import RequestKeys
    from modulo.types import Message

    def whole(req: LLMRequest, backend: str) -> str:
        exclude = {"tags"} | {name for name in ("tools", "turns", "draw") if not getattr(req, name)}
        payload = {"backend": backend, **req.model_dump(mode="json", exclude=exclude)}
        return hashlib.sha256(canonical_json(payload).encode()).hexdigest()

    schema = {"type": "array", "items": {"type": "object", "minItems": 1.0}}
    messages = (Message(role="user", content="Plan a trip " * 300),)
    base = LLMRequest(messages=messages, model="m", response_schema=frozen_object(schema), structured_output="schema")
    updates: list[dict[str, Any]] = [
        {},
        {"temperature": -0.0},
        {"temperature": 1},
        {"temperature": 1.0},
        {"temperature": True},
        {"seed": 1},
        {"seed": True},
        {"seed": 1.0},
        {"max_tokens": 10},
        {"draw": 1},
        {"sample_index": 2},
        {"stop": ("a", "b")},
        {"stop": ("a b",)},
        {"stop": ["a"]},  # not a tuple of strings: keyed without the memo
        {"model": "m2"},
        {"response_schema": frozen_object(schema)},  # another object, the same text
        {"response_schema": frozen_object({**schema, "minItems": 1})},
        {"response_schema": schema},  # a plain dict: keyed without the memo
        {"response_schema": None, "structured_output": "off"},
        {"tags": {"problem_id": "p"}},
    ]
    for _ in range(2):  # made, then found again
        seen: dict[str, str] = {}
        for update in updates:
            req = base.model_copy(update=update)
            for backend in ("openai", "scripted"):
                key = req.key(backend)
                assert key == whole(req, backend) == RequestKeys().key(req, backend), (update, backend)
                seen.setdefault(key, repr((update, backend)))
        assert len(seen) > len(updates)  # the members changed the keys (by backend too)
    assert 0 < len(_KEY_PARTS) <= 256
    # the members' text of a request like one seen is the one kept (not made again)
    again = base.model_copy(update={"messages": (Message(role="user", content="other"),)})
    assert again.key_parts("openai")[0] is base.key_parts("openai")[0]  # type: ignore[index]
    assert base.model_copy(update={"stop": ["a"]})._members_signature("openai") is None
    assert base.model_copy(update={"response_schema": schema})._members_signature("openai") is None


def test_a_template_reads_an_objects_attribute_or_item_or_nothing_as_jinja_does() -> None:
    """Objects that are no dict: the attribute first (``loop.index``, a property), else the item, else undefined."""

    class Both:
        name = "attribute"

        def __getitem__(self, key: str) -> str:
            if key == "other":
                return "item"
            raise KeyError(key)

    sources = [
        "{% for f in xs %}{{ loop.index }}.{{ f.real }}/{{ loop.length }};{% endfor %}",
        "{{ o.name }}|{{ o.other }}|{{ o.missing is defined }}",
        "{{ o.missing }}",
        "{{ xs.count is callable }}|{{ xs.nothing is defined }}",
    ]
    for source in sources:
        assert _ours_with(source, xs=[3, 4], o=Both()) == _jinja_with(source, xs=[3, 4], o=Both()), source


def _jinja_with(source: str, **variables: Any) -> str:
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)
    try:
        return env.from_string(source).render(**variables).strip() + "\n"
    except jinja2.TemplateError as exc:
        return f"error: {exc}"


def _ours_with(source: str, **variables: Any) -> str:
    try:
        return Template.from_text("t", source).render(**variables)
    except PromptError as exc:
        return f"error: {str(exc).removeprefix('template t failed to render: ')}"


def test_failures_are_ordered_by_priority_then_critic_order_as_before() -> None:
    """The backprompt's order of failures: priority (100 for an unlisted critic), then the order the critics
    are listed in (an unlisted one last), then as given; checked against the rule written out."""
    import random

    from modulo.backprompt import _sorted_by_priority
    from modulo.types import Verdict

    def reference(verdicts: list[Verdict], priorities: dict[str, int]) -> list[Verdict]:
        order = {name: i for i, name in enumerate(priorities)}
        return sorted(verdicts, key=lambda v: (priorities.get(v.critic, 100), order.get(v.critic, 10**6)))

    rng = random.Random(7)
    names = [f"c{i}" for i in range(8)]
    for _ in range(300):
        listed = rng.sample(names, rng.randint(0, len(names)))
        priorities = {name: rng.choice([0, 1, 1, 100, 150]) for name in listed}
        verdicts = [Verdict(critic=rng.choice(names), passed=False, feedback=str(i)) for i in range(rng.randint(0, 6))]
        got = _sorted_by_priority(verdicts, priorities)
        assert got == reference(verdicts, priorities)
        assert [v.feedback for v in got] == [v.feedback for v in reference(verdicts, priorities)]
        assert got is not verdicts


def test_rough_token_counts_are_ceil_of_a_quarter_of_the_length() -> None:
    import math

    from modulo.llm.tokens import approx_prompt_tokens, approx_tokens
    from modulo.types import Message

    texts = ["x" * n for n in range(0, 41)] + ["é" * 13, "a\nb"]
    for text in texts:
        assert approx_tokens(text) == (math.ceil(len(text) / 4) if text else 0)
    messages = [Message(role="user", content=t) for t in texts]
    assert approx_prompt_tokens(messages) == sum(math.ceil(len(t) / 4) if t else 0 for t in texts)
    assert approx_prompt_tokens([]) == 0


def test_a_text_is_escaped_as_the_standard_encoder_writes_it_with_orjson_or_without(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``escaped`` (every prompt hash, cache key and stored request) writes a text's JSON body as the standard
    encoder does, by orjson or, without it, by byte scans: control characters, quotes, non-ASCII, long texts;
    a lone surrogate (no UTF-8 holds it) raises UnicodeEncodeError either way. The prompt hasher's digests
    stay those of the whole canonical JSON."""
    import hashlib
    import random
    from json.encoder import encode_basestring

    from modulo import canonical
    from modulo.canonical import PromptHasher, escaped, messages_bytes
    from modulo.types import Message

    rng = random.Random(3)
    chars = [chr(i) for i in range(128)] + ["é", "\u2b50", "\u2028", "\ufeff", "\U0001f600", "\x7f"]
    texts = ["".join(rng.choice(chars) for _ in range(rng.randint(0, 40))) for _ in range(3000)]
    texts.append('Plan a trip: "Paris" \u2b50 caf\u00e9\n\ttabs \\ and\r\n\x01 ' * 500)
    request = texts[-1]
    prompts = [[Message(role="system", content="be brief"), Message(role="user", content=request)]]
    for k in range(4):
        feedback = f'\n\nFeedback {k}: \u00e9 "x"\x02\n' * 3
        prompts.append([prompts[0][0], Message(role="user", content=request + feedback)])
    for with_orjson in (True, False):
        if with_orjson:
            assert canonical.orjson is not None  # a dependency: this pass is orjson's, not the byte scans' twice
        else:
            monkeypatch.setattr(canonical, "orjson", None)
        for text in texts:
            assert escaped(text) == encode_basestring(text)[1:-1].encode(), repr(text)
        with pytest.raises(UnicodeEncodeError):
            escaped("half an emoji \ud83d")
        hasher = PromptHasher()
        for messages in prompts:
            assert hasher.sha(messages) == hashlib.sha256(messages_bytes(messages)).hexdigest()
            assert hasher.encoded(messages) == canonical_json([m.model_dump() for m in messages]).encode()


def test_a_plain_value_read_from_json_gets_the_same_canonical_text_and_verdict_through_orjson() -> None:
    """A reply read from JSON with no float in it is encoded by orjson: the same canonical text, plan and error
    as the standard encoder's, for random values (control characters, non-ASCII keys and text, integers at and
    past 64 bits, lone surrogates, floats, NaN) and for the special cases told apart before."""
    import random

    from modulo.reformulate import _plain_json, read_json

    rng = random.Random(5)
    chars = [chr(i) for i in range(128)] + ["é", "\u2b50", "\u2028", "\ufeff", "\U0001f600", "\x7f", "Ω"]

    def text() -> str:
        return "".join(rng.choice(chars) for _ in range(rng.randint(0, 8)))

    def value(depth: int = 0) -> Any:
        r = rng.random()
        if depth > 3 or r < 0.45:
            return rng.choice(
                [text(), rng.randint(-(2**64), 2**64), rng.randint(-9, 9), True, False, None, 2**63 - 1, -(2**63)]
            )
        if r < 0.7:
            return [value(depth + 1) for _ in range(rng.randint(0, 4))]
        return {text(): value(depth + 1) for _ in range(rng.randint(0, 4))}

    replies = [json.dumps(value(), ensure_ascii=rng.random() < 0.5) for _ in range(3000)]
    replies += ['{"a": "\\ud800"}', "[1.5, 2]", "[1e400]", '{"x": NaN}', "[-Infinity, 3]", "[1E2]", '["1.5e3"]']
    replies += ["[" + "1," * 50 + "18446744073709551616]", '{"b": 1, "a": {"d": [], "c": {}}}', "-0", "[0.0]"]
    plain_seen = by_orjson = 0
    for reply in replies:
        value_read, plain = read_json(reply)
        by_orjson += plain and _plain_json(value_read) is not None  # the text orjson wrote, not the fallback's
        assert plain == (not _holds_a_float(json.loads(reply))), reply
        ours = validated(Anything(), value_read, plain=plain)  # type: ignore[arg-type]
        standard = validated(Anything(), json.loads(reply))  # type: ignore[arg-type]
        assert (ours.plan, ours.error, ours.canonical) == (standard.plan, standard.error, standard.canonical), reply
        plain_seen += plain
    assert plain_seen > 2000
    assert by_orjson > 2000


def _holds_a_float(value: Any) -> bool:
    if isinstance(value, dict):
        return any(map(_holds_a_float, value.values()))
    if isinstance(value, list):
        return any(map(_holds_a_float, value))
    return type(value) is float


def test_the_failures_reported_are_the_failing_verdicts_less_the_crashed() -> None:
    import itertools

    from modulo.backprompt import AllStrategy, BackpromptContext
    from modulo.types import IterationRecord, Verdict

    kinds = [
        Verdict(critic=f"c{i}", passed=passed, applicable=applicable, error=error, feedback=str(i))
        for i, (passed, applicable, error) in enumerate(
            itertools.product((True, False), (True, False), (None, "it crashed"))
        )
    ]

    class Strict(Verdict):  # passed, yet blocks certification: its own accepts decides
        @property
        def accepts(self) -> bool:
            return False

    kinds.append(Strict(critic="strict", passed=True, feedback="strict"))
    rec = IterationRecord(index=0, verdicts=kinds)
    ctx = BackpromptContext(problem=None, benchmark=None, first_prompt=[], history=[rec])  # type: ignore[arg-type]
    assert AllStrategy().selected(ctx) == [v for v in rec.failing if v.error is None]
    # failed, applicable, no crash; and the verdict whose own accepts says no
    assert [v.feedback for v in AllStrategy().selected(ctx)] == ["4", "strict"]


@pytest.mark.slow
def test_the_generation_cpu_script_times_each_part_inside_the_run_and_puts_every_method_back(
    data_dir: Path, tmp_path: Path
) -> None:
    """``benchmarks/generation_cpu.py`` on a tiny run: every part timed in each run, the half their sum, no
    more than the event loop's thread spent; and the methods it timed are the originals again afterwards."""
    import subprocess
    import sys

    from modulo.canonical import PromptHasher
    from modulo.metacontroller import Metacontroller

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "generation_cpu.py"
    if not (data_dir / "travelplanner").is_dir():
        pytest.skip("no TravelPlanner data")
    before = (Metacontroller.first_prompt, Metacontroller._next_messages, PromptHasher.sha)
    figures_file = tmp_path / "figures.json"
    args = ["--limit", "2", "--budget", "2", "--repeat", "2", "--json", str(figures_file)]
    done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    figures = json.loads(figures_file.read_text())
    parts = ["first prompt", "prompt hash", "generate", "reformulate", "backprompt"]
    for run in figures["runs_us"]:
        assert all(run[p] > 0 for p in parts)
        assert abs(sum(run[p] for p in parts) - run["generation half"]) < 1e-6
        assert run["generation half"] <= run["event loop's thread"]
    assert "generation half" in done.stdout
    sys.path.insert(0, str(script.parent))
    try:
        import generation_cpu

        with generation_cpu.timed_parts():
            assert Metacontroller.first_prompt is not before[0]
        assert (Metacontroller.first_prompt, Metacontroller._next_messages, PromptHasher.sha) == before
    finally:
        sys.path.remove(str(script.parent))
