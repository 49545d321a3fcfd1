"""Every command in README.md, experiments/README.md and benchmarks/README.md, run as a new user would
(issue 11).

Commands are read from the ```bash blocks. Each one is classified by the first rule of ``RULES`` it
matches, and a command that no rule covers fails the test, so a new README line gets a decision:

* ``run``: executed as written in a scratch directory (offline: search baselines, scripted backends,
  the data and tool commands), with placeholders (RUN_DIR, SWEEP_ROOT, PLANS.jsonl, ...) replaced by
  what earlier commands of this module produced;
* ``check``: needs a network model (OpenAI, Anthropic, a vLLM server): bound with ``modulo check`` and
  the same overrides (every component resolved, the problems loaded, no call made), sweeps with the
  first value of each list; a fake key stands in for the real one;
* ``install``: not executed here (``.ci/run`` runs the install lines); the flags and extras are checked;
* ``skip``: needs what a test cannot have (a Ray cluster, SLURM, a paid API through a script), with
  the reason shown by ``pytest -rs``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from modulo.cli.main import cli
from modulo.llm.local import PORTABLE_CMAKE_ARGS

pytestmark = pytest.mark.slow  # every README command runs as a real process: minutes

REPO = Path(__file__).resolve().parents[2]
DOCS = ("README.md", "experiments/README.md", "benchmarks/README.md")


@dataclass(frozen=True)
class Command:
    doc: str
    line: int
    text: str

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"


def extract(doc: str) -> list[Command]:
    """The commands of the ```bash blocks of ``doc``: continuation lines joined, comments kept out."""
    text = (REPO / doc).read_text(encoding="utf-8")
    found: list[Command] = []
    for block in re.finditer(r"^```(?:bash|sh)\n(.*?)^```", text, re.S | re.M):
        first_line = text.count("\n", 0, block.start(1)) + 1
        pending, start = "", 0
        for offset, raw in enumerate(block.group(1).splitlines()):
            line = raw.rstrip()
            if not pending and (not line.strip() or line.lstrip().startswith("#")):
                continue
            if not pending:
                start = first_line + offset
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            words = shlex.split(pending + line, comments=True)
            pending = ""
            found.append(Command(doc, start, shlex.join(words)))
    return found


COMMANDS = [c for doc in DOCS for c in extract(doc)]


# ------------------------------------------------------------------------------------------- rules

NETWORK_LLM = re.compile(r"\bllm=(openai|anthropic|vllm)\b|\+experiment=|LLM=")
RULES: list[tuple[str, str, str]] = [
    # (regex on the command, action, reason)
    (
        r"^pip install -e extracted/",
        "skip",
        "installs the package an extraction wrote into this environment (tests/extract/test_cli.py installs it "
        "with pip --target and lists it)",
    ),
    (r"^python3 -m venv|^pip install", "install", "installs packages: .ci/run runs the install lines"),
    (r"^export ", "env", "sets the environment"),
    (r"hydra/launcher=ray .*address=|hydra/launcher=slurm", "skip", "needs a Ray cluster or SLURM"),
    (r"(^|\s)(\w+=\S+ )?experiments/\w+\.sh", "script", "calls a paid API; checked with bash -n"),
    (r"^mlflow ui|jupyter lab", "skip", "starts an interactive server that runs until stopped"),
    (
        r"^python benchmarks/",
        "skip",
        "a speed or scale measurement: benchmarks/ checks its own targets, tests never time",
    ),
    (
        r"^modulo critics extract .*\bllm=(openai|anthropic|vllm)\b",
        "skip",
        "calls a network model (the same command runs offline with llm=scripted)",
    ),
    (r"^modulo critics (list|extract|audit) ", "run", ""),
    (r"^modulo (run|check) ", "modulo-run", ""),
    (r"^modulo (resume|report|show|dissect|export|evaluate|data|tools|track|list|synth|bench) ", "run", ""),
    (r"^python experiments/offline\.py", "run", ""),
]


def classify(command: Command) -> tuple[str, str]:
    for pattern, action, reason in RULES:
        if re.search(pattern, command.text):
            if action == "modulo-run":
                return (
                    ("check", "needs a network model: bound with modulo check, no call")
                    if NETWORK_LLM.search(command.text)
                    else ("run", "")
                )
            return action, reason
    return "unclassified", ""


def test_every_command_is_classified() -> None:
    assert len(COMMANDS) > 20, "the extractor found too few commands"
    unclassified = [c.id + ": " + c.text for c in COMMANDS if classify(c)[0] == "unclassified"]
    assert not unclassified, "add a rule for: " + "; ".join(unclassified)


# ----------------------------------------------------------------------------------------- install


def test_readme_and_ci_build_llama_cpp_with_the_same_portable_flags() -> None:
    """The first CMAKE_ARGS of README.md and of .ci/run are the same, and are what modulo's crash
    message tells a user to reinstall with."""
    first = re.compile(r'CMAKE_ARGS="([^"]*)"')
    readme = first.search((REPO / "README.md").read_text(encoding="utf-8"))
    ci = first.search((REPO / ".ci" / "run").read_text(encoding="utf-8"))
    assert readme and ci
    assert readme.group(1) == ci.group(1) == PORTABLE_CMAKE_ARGS
    assert "-DGGML_NATIVE=OFF" in PORTABLE_CMAKE_ARGS


@pytest.mark.parametrize("command", [c for c in COMMANDS if classify(c)[0] == "install"], ids=lambda c: c.id)
def test_install_lines_name_extras_that_exist(command: Command) -> None:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    named = re.findall(r'"\.\[([\w,]+)\]"', command.text.replace("'", '"'))
    assert named, f"no extra named in {command.text}"
    for group in named:
        for extra in group.split(","):
            assert extra in extras, f"{command.id}: extra {extra!r} is not in pyproject.toml"
    if "llama" in command.text or '".[local]"' in command.text:
        assert f'CMAKE_ARGS="{PORTABLE_CMAKE_ARGS}"' in command.text


# ------------------------------------------------------------------------------------------- running


class Workspace:
    """A scratch directory where the README's commands run, one after another, sharing their outputs."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.run_dir: Path | None = None
        self.sweep_root: Path | None = None

    def newest(self, pattern: str) -> Path | None:
        found = sorted(self.root.glob(pattern), key=lambda p: p.stat().st_mtime)
        return found[-1] if found else None

    def run_with(self, problem_id: str) -> Path:
        """The newest run directory that holds ``problem_id``."""
        for run in sorted(self.root.glob("runs/*/*"), key=lambda p: p.stat().st_mtime, reverse=True):
            records = run / "records.jsonl"
            if records.exists() and f'"{problem_id}"' in records.read_text(encoding="utf-8"):
                return run
        raise AssertionError(f"no run directory holds problem {problem_id}")

    def run_of(self, benchmark: str, *, unchanged: bool = False) -> Path:
        """The newest run directory of a benchmark (a command that only makes sense for its runs); ``unchanged``:
        of a run whose requests no user or update changed (one an official submission can hold)."""
        for run in sorted(self.root.glob("runs/*/*"), key=lambda p: p.stat().st_mtime, reverse=True):
            manifest = run / "run.json"
            if manifest.exists():
                info = json.loads(manifest.read_text(encoding="utf-8"))
                name = str(info.get("benchmark", {}).get("name", ""))
                user = info.get("user") or {}
                if unchanged and (user.get("name") or user.get("updates")):
                    continue
                if name == benchmark or name.startswith(benchmark + "/"):
                    return run
        raise AssertionError(f"no run directory of benchmark {benchmark}")

    def substitute(self, words: list[str]) -> list[str]:
        plans = self.root / "sub.jsonl"
        out = []
        for w in words:
            if w == "RUN_DIR" and words[:2] == ["modulo", "show"]:
                w = str(self.run_with(words[3]))
            elif w == "RUN_DIR" and "travelplanner-submission" in words:
                w = str(self.run_of("travelplanner", unchanged=True))
            elif w == "RUN_DIR" or re.fullmatch(r"runs/\d{4}-\d\d-\d\d/\d\d-\d\d-\d\d", w):
                assert self.run_dir is not None, "no run directory made yet"
                w = str(self.run_dir)
            elif w == "SWEEP_ROOT" or w.startswith("multirun/"):
                assert self.sweep_root is not None, "no sweep made yet"
                w = str(self.sweep_root)
            elif w in ("PLANS.jsonl", "sub.jsonl"):
                w = str(plans)
            out.append(w)
        return out


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    root = tmp_path_factory.mktemp("readme")
    old = Path.cwd()
    keys = {k: os.environ.get(k) for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    os.environ["OPENAI_API_KEY"] = os.environ["ANTHROPIC_API_KEY"] = "sk-test-not-a-real-key"
    os.chdir(root)
    try:
        (root / "experiments").symlink_to(REPO / "experiments")
        yield Workspace(root)
    finally:
        os.chdir(old)
        for k, v in keys.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def modulo(args: list[str]) -> int:
    try:
        cli.main(args, prog_name="modulo", standalone_mode=False)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    return 0


def _first_values(words: list[str]) -> list[str]:
    """A sweep's overrides with the first value of each list (``a=x,y`` -> ``a=x``)."""
    out = []
    for w in words:
        key, eq, value = w.partition("=")
        if eq and "," in value and not value.startswith(("[", "{", "'", '"')) and "(" not in value:
            w = f"{key}={value.split(',')[0]}"
        out.append(w)
    return out


# a command that reads plans written by a later command (PLANS.jsonl) runs after the others
RUNNABLE = sorted(
    (c for c in COMMANDS if classify(c)[0] in ("run", "check", "env", "script", "skip")),
    key=lambda c: "PLANS.jsonl" in c.text,
)


@pytest.mark.parametrize("command", RUNNABLE, ids=lambda c: c.id)
def test_readme_command(command: Command, workspace: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    action, reason = classify(command)
    words = shlex.split(command.text)
    if action == "skip":
        pytest.skip(f"{reason}: {command.text}")
    if action == "env":
        return  # MODULO_DATA_DIR is set for the whole suite (tests/conftest.py); the others are placeholders
    if action == "script":
        script = next(w for w in words if w.startswith("experiments/"))
        assert subprocess.run(["bash", "-n", str(REPO / script)], check=False).returncode == 0
        pytest.skip(f"{reason}: {command.text}")
    words = workspace.substitute(words)
    if words[0] == "python":
        if any(w in ("ray_local", "submitit_local") for w in words):
            _need_launcher(words)
        result = subprocess.run([sys.executable, *words[1:]], cwd=workspace.root, capture_output=True, text=True,
                                timeout=600, check=False)  # fmt: skip
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        return
    args = words[1:]
    if (args[0] == "track" or "tracker=mlflow" in args) and importlib.util.find_spec("mlflow") is None:
        pytest.skip('needs MLflow: pip install -e ".[mlflow]"')
    if any(a.startswith("hydra/launcher=") for a in args):
        _need_launcher(args)
    if action == "check":
        args = ["check", *_first_values([a for a in args[1:] if a not in ("-m", "--multirun")])]
    code = modulo(args)
    out = capsys.readouterr()
    assert code == 0, f"{command.text}\n{out.out[-3000:]}\n{out.err[-3000:]}"
    if args[0] == "run" and "-m" not in args:
        workspace.run_dir = workspace.newest("runs/*/*")
    elif args[0] == "run":
        workspace.sweep_root = workspace.newest("multirun/*/*")
    if args[:1] == ["export"] or "travelplanner-submission" in args:
        assert (workspace.root / "sub.jsonl").exists()


def _need_launcher(words: list[str]) -> None:
    for name, module, extra in (
        ("ray", "hydra_plugins.hydra_ray_launcher", "ray"),
        ("submitit", "hydra_plugins.hydra_submitit_launcher", "slurm"),
    ):
        if any(name in w for w in words if "launcher" in w or w in ("ray_local", "submitit_local")):
            try:
                found = importlib.util.find_spec(module) is not None
            except ModuleNotFoundError:
                found = False
            if not found:
                pytest.skip(f'needs the launcher plugin: pip install -e ".[{extra}]"')
