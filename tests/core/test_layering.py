"""The core is a pure host: modulo/ never reaches into the built-in benchmark packages or their data,
and the registry binds critics only the declared way."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from modulo import components
from modulo.binding import bind_critics
from modulo.critic import critic
from modulo.errors import ConfigError
from modulo.types import Problem, Verdict

ROOT = Path(__file__).resolve().parents[2]
BUILTIN_PACKAGES = sorted(p.name for p in (ROOT / "critics").iterdir() if (p / "__init__.py").is_file())
#: ``import critics``, ``from critics.x``, ``"critics.x"`` (string imports), ``critics/x`` (paths)
NAMES_A_BENCHMARK_PACKAGE = re.compile(
    r"^\s*(from|import)\s+critics\b|[\"']critics[./]|critics[./](" + "|".join(BUILTIN_PACKAGES) + r")\b",
    re.MULTILINE,
)
#: a path built from the data directory: the core never opens a benchmark's files itself
READS_BENCHMARK_DATA = re.compile(r"data_dir\w*(\(\))?\s*/\s*[\"']")


def core_modules() -> list[Path]:
    return sorted((ROOT / "modulo").rglob("*.py"))


def test_the_patterns_catch_what_they_are_for() -> None:
    assert BUILTIN_PACKAGES and "travelplanner" in BUILTIN_PACKAGES
    for bad in ("from critics.synth import audit", "import critics", 'importlib.import_module("critics.synth.audit")',
                "'critics/travelplanner/golden'", "see critics.natural_plan.benchmark"):  # fmt: skip
        assert NAMES_A_BENCHMARK_PACKAGE.search(bad), bad
    for fine in ("components.critics.get(name)", "build_critics(cfg)", "the critics. Then"):
        assert not NAMES_A_BENCHMARK_PACKAGE.search(fine), fine
    assert READS_BENCHMARK_DATA.search('data_dir / "travelplanner" / "golden"')
    assert READS_BENCHMARK_DATA.search('data_dir() / "x"')


def test_no_core_module_names_a_builtin_benchmark_package_or_reads_its_data() -> None:
    offenders = []
    for path in core_modules():
        text = path.read_text(encoding="utf-8")
        for pattern in (NAMES_A_BENCHMARK_PACKAGE, READS_BENCHMARK_DATA):
            for m in pattern.finditer(text):
                line = text.count("\n", 0, m.start()) + 1
                offenders.append(f"{path.relative_to(ROOT)}:{line}: {m.group(0).strip()}")
    assert not offenders, "modulo/ must reach benchmarks only through the plugin door:\n" + "\n".join(offenders)


@critic("layering/inner", group="hard")
def _inner(problem: Problem, plan: Any) -> Verdict:
    return Verdict.ok()


def test_registry_refuses_a_key_that_differs_from_the_declared_name() -> None:
    with pytest.raises(ValueError, match="registered as 'layering/outer' but declares the name 'layering/inner'"):
        components.critics.register("layering/outer", _inner)
    assert "layering/outer" not in components.critics


def test_declared_options_only_and_a_declaration_must_match_the_signature() -> None:
    seen: dict[str, Any] = {}

    @critic("layering/declares", group="hard", options=("mode",))
    def declares(problem: Problem, plan: Any, *, mode: str = "strict", hints: bool = False) -> Verdict:
        seen.update(mode=mode, hints=hints)
        return Verdict.ok()

    components.critics.register("layering/declares", declares, replace=True)
    try:
        bench = components.benchmarks.get("synth/tasks")(n=1)
        (bound,) = bind_critics(["layering/declares"], bench, {"mode": "official", "hints": True})
        bound(bench.load("generated")[0], {})
        # mode is declared: passed; hints is a parameter but not declared: never guessed from its name
        assert seen == {"mode": "official", "hints": False}
        with pytest.raises(ConfigError, match="critic_args names 'nope'"):
            bind_critics(["layering/declares"], bench, {}, {"nope": {}})
    finally:
        components.critics.unregister("layering/declares")

    with pytest.raises(TypeError, match=r"declares option\(s\) \['hints'\]"):
        critic("layering/bad", options=("hints",))(lambda problem, plan, *, mode="strict": Verdict.ok())
