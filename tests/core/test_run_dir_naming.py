"""A run that names no directory is a new run: two runs started within the same second (Hydra names the
directory by the second) each get their own directory, the second a sibling ``H-M-S-2``, instead of the
second being refused as another configuration or taken for a resumption of the first."""

from __future__ import annotations

import json
import logging
from datetime import datetime
from pathlib import Path

import hydra.core.utils
import pytest

from tests.cli_support import run_main

#: a run of a second or less: 2 synthesized problems, the scripted model's greedy plans
QUICK = ("benchmark=synth/calendar_small", "benchmark.limit=2", "llm=scripted", "metacontroller.max_iterations=1")


class _Frozen(datetime):
    @classmethod
    def now(cls, tz: object = None) -> _Frozen:  # type: ignore[override]
        return cls(2026, 1, 2, 3, 4, 5)


@pytest.fixture
def same_second(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Hydra's clock stopped at one second; the working directory a fresh one. The runs' parent folder."""
    monkeypatch.setattr(hydra.core.utils, "datetime", _Frozen)
    monkeypatch.chdir(tmp_path)
    return tmp_path / "runs" / "2026-01-02"


def _benchmark(run_dir: Path) -> str:
    return str(json.loads((run_dir / "run.json").read_text(encoding="utf-8"))["benchmark"]["name"])


def test_runs_started_in_the_same_second_each_get_a_directory(
    capsys: pytest.CaptureFixture[str], same_second: Path
) -> None:
    code, _, err = run_main(capsys, "run", *QUICK)
    assert code == 0, err
    # another configuration in the same second: a sibling, not a refusal
    code, _, err = run_main(capsys, "run", *QUICK, "benchmark.limit=1")
    assert code == 0, err
    # the same configuration again: a new run too, not a resumption of the first
    code, _, err = run_main(capsys, "run", *QUICK)
    assert code == 0, err
    assert sorted(p.name for p in same_second.iterdir()) == ["03-04-05", "03-04-05-2", "03-04-05-3"]
    for name, problems in (("03-04-05", 2), ("03-04-05-2", 1), ("03-04-05-3", 2)):
        lines = (same_second / name / "records.jsonl").read_text(encoding="utf-8").splitlines()
        assert len(lines) == problems, name
        assert _benchmark(same_second / name).startswith("synth/")
    # the last run's log file is its own directory's, not the taken one's (Hydra opened it there first)
    logs = [Path(h.baseFilename) for h in logging.getLogger().handlers if isinstance(h, logging.FileHandler)]
    assert logs and all(log.parent.name == "03-04-05-3" and log.exists() for log in logs), logs


def test_a_directory_named_on_the_command_line_is_used_as_it_is(
    capsys: pytest.CaptureFixture[str], same_second: Path, tmp_path: Path
) -> None:
    target = tmp_path / "mine"
    code, _, err = run_main(capsys, "run", *QUICK, f"hydra.run.dir={target}")
    assert code == 0, err
    # named again with another configuration: refused (it holds another run), never moved elsewhere
    code, _, err = run_main(capsys, "run", *QUICK, "benchmark.limit=1", f"hydra.run.dir={target}")
    assert code == 2 and "holds a run with another configuration" in err
    assert not (tmp_path / "mine-2").exists() and not same_second.exists()


def test_a_user_set_output_subdir_is_saved_by_the_run_never_into_another_runs_directory(
    capsys: pytest.CaptureFixture[str], same_second: Path, tmp_path: Path
) -> None:
    code, _, err = run_main(capsys, "run", *QUICK, "hydra.output_subdir=saved")
    assert code == 0, err
    first = same_second / "03-04-05"
    saved = {p.name: p.read_bytes() for p in (first / "saved").iterdir()}
    assert sorted(saved) == ["config.yaml", "hydra.yaml", "overrides.yaml"]
    assert b"output_subdir: saved" in saved["hydra.yaml"] and b"benchmark.limit=2" in saved["overrides.yaml"]
    assert not (first / ".hydra").exists()
    # another configuration in the same second: Hydra named the first run's directory, which must keep its files
    code, _, err = run_main(capsys, "run", *QUICK, "benchmark.limit=1", "hydra.output_subdir=saved")
    assert code == 0, err
    assert {p.name: p.read_bytes() for p in (first / "saved").iterdir()} == saved
    assert b"benchmark.limit=1" in (same_second / "03-04-05-2" / "saved" / "overrides.yaml").read_bytes()
    # refused for another configuration in a named directory: its saved files unchanged; null saves none
    target = tmp_path / "mine"
    code, _, err = run_main(capsys, "run", *QUICK, f"hydra.run.dir={target}", "hydra.output_subdir=kept")
    assert code == 0, err
    kept = (target / "kept" / "config.yaml").read_bytes()
    code, _, err = run_main(
        capsys, "run", *QUICK, "benchmark.limit=1", f"hydra.run.dir={target}", "hydra.output_subdir=kept"
    )
    assert code == 2 and "holds a run with another configuration" in err
    assert (target / "kept" / "config.yaml").read_bytes() == kept
    code, _, err = run_main(capsys, "run", *QUICK, f"hydra.run.dir={tmp_path / 'bare'}", "hydra.output_subdir=null")
    assert code == 0, err
    assert not (tmp_path / "bare" / ".hydra").exists() and (tmp_path / "bare" / "records.jsonl").exists()


def _sweep_overrides(sweep_dir: Path) -> list[str]:
    import yaml

    saved = yaml.safe_load((sweep_dir / "multirun.yaml").read_text(encoding="utf-8"))
    return [str(o) for o in saved["hydra"]["overrides"]["task"]]


def test_sweeps_started_in_the_same_second_each_get_a_sweep_directory(
    capsys: pytest.CaptureFixture[str], same_second: Path, tmp_path: Path
) -> None:
    from modulo.cli.hydra_app import sweep_command

    sweeps = tmp_path / "multirun" / "2026-01-02"
    code, _, err = run_main(capsys, "run", "-m", *QUICK, "benchmark.limit=1,2")
    assert code == 0, err
    # another sweep in the same second: a sweep directory of its own, never the first one's job directories
    code, _, err = run_main(capsys, "run", "-m", *QUICK, "critics=all,json")
    assert code == 0, err
    assert sorted(p.name for p in sweeps.iterdir()) == ["03-04-05", "03-04-05-2"]
    assert "benchmark.limit=1,2" in _sweep_overrides(sweeps / "03-04-05")
    assert "critics=all,json" in _sweep_overrides(sweeps / "03-04-05-2")
    for sweep, problems in (("03-04-05", [1, 2]), ("03-04-05-2", [2, 2])):
        lines = [len((sweeps / sweep / job / "records.jsonl").read_text().splitlines()) for job in ("0", "1")]
        assert lines == problems, sweep
    # the command that runs each sweep again names that sweep's own overrides and directory
    again = sweep_command(sweeps / "03-04-05-2")
    assert again is not None and "critics=all,json" in again and again.endswith("03-04-05-2")
    assert again.count("hydra.sweep.dir=") == 1 and "benchmark.limit=1,2" not in again


def test_a_sweep_directory_named_on_the_command_line_is_used_as_it_is(
    capsys: pytest.CaptureFixture[str], same_second: Path, tmp_path: Path
) -> None:
    target = tmp_path / "mysweep"
    for _ in range(2):  # the second sweep resumes each job in the named directory
        code, _, err = run_main(capsys, "run", "-m", *QUICK, "benchmark.limit=1,2", f"hydra.sweep.dir={target}")
        assert code == 0, err
    assert sorted(p.name for p in target.iterdir() if p.is_dir()) == ["0", "1"]
    assert not (tmp_path / "mysweep-2").exists() and not (tmp_path / "multirun").exists()
    assert len((target / "1" / "records.jsonl").read_text().splitlines()) == 2


def test_a_presets_timestamped_sweep_directory_is_claimed_and_a_printing_sweep_claims_none(
    same_second: Path, tmp_path: Path
) -> None:
    from modulo.cli.hydra_app import claim_sweep_dir, search_path_override

    quick = ["-m", *QUICK, *search_path_override()]  # run_hydra adds the benchmarks' config groups
    preset = [*quick, "+experiment=critic_ablation"]
    root = Path("multirun/critic_ablation/2026-01-02")
    assert claim_sweep_dir(preset) == root / "03-04-05"
    assert claim_sweep_dir(preset) == root / "03-04-05-2"  # the first is held: its sibling
    assert claim_sweep_dir(quick) == Path("multirun/2026-01-02/03-04-05")
    # a named directory is the user's; --cfg and its kin print the config and launch nothing
    assert claim_sweep_dir([*quick, f"hydra.sweep.dir={tmp_path / 'x'}"]) is None
    assert claim_sweep_dir([*quick, "--cfg", "hydra"]) is None
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.glob("multirun/*/*/*")) == [
        "multirun/critic_ablation/2026-01-02/03-04-05",
        "multirun/critic_ablation/2026-01-02/03-04-05-2",
    ]
    assert [p.name for p in (tmp_path / "multirun" / "2026-01-02").iterdir()] == ["03-04-05"]
