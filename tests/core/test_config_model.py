"""One configuration model (issue 12 item 3): the library settings are the config sections, Hydra's
schema is derived from them, and one converter reads a composed config, a run's config.yaml and a
hand-written dict alike."""

from __future__ import annotations

import dataclasses

import pytest
import yaml
from omegaconf import OmegaConf
from pydantic import BaseModel

from modulo.build import build_session, loop_settings
from modulo.cli.hydra_app import compose_config
from modulo.cli.schema import hydra_schema
from modulo.config import InvalidSettings, LLMSettings, LoopSettings, MetacontrollerConf, ModuloConfig, UserOptions
from modulo.errors import ConfigError
from modulo.llm.base import LLMSettings as BackendSettings
from modulo.metacontroller import LoopSettings as LoopSettingsOfTheLoop


def test_the_backends_and_the_loop_take_the_config_sections_themselves() -> None:
    fields = ModuloConfig.model_fields
    assert fields["llm"].annotation is LLMSettings is BackendSettings
    # the loop's settings are the metacontroller section plus the user options, by inheritance
    assert LoopSettings is LoopSettingsOfTheLoop
    assert fields["metacontroller"].annotation is MetacontrollerConf and issubclass(LoopSettings, MetacontrollerConf)
    assert issubclass(LoopSettings, UserOptions) and issubclass(fields["user"].annotation, UserOptions)
    cfg = ModuloConfig.from_dict(
        {"metacontroller": {"max_iterations": 4}, "user": {"abstain": True, "updates": [{"after": 1, "text": "t"}]}}
    )
    settings = loop_settings(cfg)
    assert settings.max_iterations == 4 and settings.abstain and settings.updates[0].after == 1


def _sections(model: type[BaseModel]) -> list[tuple[str, type[BaseModel]]]:
    out = [("", model)]
    for name, info in model.model_fields.items():
        sub = info.annotation
        if isinstance(sub, type) and issubclass(sub, BaseModel) and not getattr(sub, "folds_extra_keys", False):
            out += [(f"{name}.{k}" if k else name, m) for k, m in _sections(sub)]
    return out


def test_hydra_schema_has_every_field_and_default_of_the_model() -> None:
    for where, model in _sections(ModuloConfig):
        schema = hydra_schema(model)
        assert [f.name for f in dataclasses.fields(schema)] == list(model.model_fields), where
    derived = dataclasses.asdict(hydra_schema(ModuloConfig)())
    assert derived == ModuloConfig().to_dict()


def test_a_composed_config_a_config_yaml_and_a_dict_give_the_same_configuration() -> None:
    composed = compose_config(["benchmark=synth/calendar", "llm=scripted", "benchmark.n=3", "+labels.k=7"])
    assert composed.benchmark.args["n"] == 3 and composed.labels == {"k": "7"}
    written = yaml.safe_load(yaml.safe_dump(composed.to_dict()))  # what config.yaml holds
    assert ModuloConfig.from_dict(written) == composed
    flat = {**written, "benchmark": {"name": "synth/calendar", "split": "generated", **written["benchmark"]["args"]}}
    assert ModuloConfig.from_dict(flat).benchmark == composed.benchmark  # a config group's flat node


def test_wrong_keys_and_values_name_the_key_and_what_it_takes() -> None:
    with pytest.raises(ConfigError, match=r"unknown configuration key 'metacontroller.max_iteration'\. Did you mean"):
        ModuloConfig.from_dict({"metacontroller": {"max_iteration": 3}})
    with pytest.raises(ConfigError, match=r"llm.structured_output must be one of schema, json, off, not 'maybe'"):
        ModuloConfig.from_dict({"llm": {"structured_output": "maybe"}})
    with pytest.raises(ConfigError, match=r"run.concurrency must be at least 1, not 0"):
        ModuloConfig.from_dict({"run": {"concurrency": 0}})
    with pytest.raises(InvalidSettings, match=r"metacontroller.on_fixed_point must be one of stop, temperature, vary"):
        LoopSettings(on_fixed_point="retry")  # type: ignore[arg-type]


def test_a_nested_section_s_own_check_is_named_once() -> None:
    with pytest.raises(InvalidSettings) as info:
        ModuloConfig.from_dict({"user": {"question_costs_iteration": False}})
    assert str(info.value).startswith("user.question_costs_iteration=false needs user.max_questions"), info.value


def test_a_value_set_in_python_after_construction_is_checked_before_anything_runs() -> None:
    cfg = ModuloConfig()
    cfg.benchmark.name = "synth/calendar"
    cfg.llm.structured_output = "maybe"  # type: ignore[assignment]
    with pytest.raises(ConfigError, match=r"llm\.structured_output must be one of schema, json, off"):
        build_session(cfg, load_problems=False)


def test_a_section_error_is_said_once_with_no_empty_key_before_it() -> None:
    # a section's own error, raised while the whole configuration is validated, was printed as
    # ": run: run.concurrency must be ..." (an empty key, then the section twice)
    for data, message in (
        ({"run": {"concurrency": 0}}, "run.concurrency must be at least 1, not 0"),
        ({"metacontroller": {"max_iterations": -1}}, "metacontroller.max_iterations must be at least 1, not -1"),
    ):
        with pytest.raises(InvalidSettings) as caught:
            ModuloConfig.from_dict(data)
        assert str(caught.value) == message


def test_a_misspelt_key_set_in_python_is_a_config_error_naming_it() -> None:
    cfg = ModuloConfig()
    with pytest.raises(ConfigError, match=r"unknown configuration key 'benchmark\.limt'\. Did you mean 'limit'"):
        cfg.benchmark.limt = 5  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match=r"unknown configuration key 'metacontrolr'"):
        cfg.metacontrolr = None  # type: ignore[attr-defined]
    cfg.benchmark.limit = 5  # a known key is set as before
    assert cfg.benchmark.limit == 5


def test_the_schema_is_made_afresh_so_a_class_a_launcher_damaged_is_never_reused() -> None:
    # Hydra's Ray launcher round-trips the config through cloudpickle < 3, which leaves copies of
    # dataclasses.MISSING as the defaults of the schema classes the driver holds
    first = hydra_schema(ModuloConfig)
    for f in dataclasses.fields(first):
        f.default = type(dataclasses.MISSING)()
    fresh = hydra_schema(ModuloConfig)
    assert fresh is not first
    assert OmegaConf.structured(fresh).benchmark.name == ModuloConfig().benchmark.name
