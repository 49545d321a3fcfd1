"""Backends declare what they are as a typed profile (Capabilities); the client and the build read it."""

from __future__ import annotations

import pytest

from modulo import components
from modulo.build import resolve_prompt
from modulo.config import ModuloConfig
from modulo.llm.base import DEFAULT_CAPABILITIES, Capabilities, LLMSettings, capabilities_of
from modulo.llm.client import build_client


def test_builtin_backends_declare_their_profile() -> None:
    profiles = {name: capabilities_of(components.llms.get(name)) for name in ("openai", "anthropic", "local", "replay")}
    assert profiles["openai"] == profiles["anthropic"] == DEFAULT_CAPABILITIES
    assert profiles["local"] == Capabilities(free=True, prefers_json=True)
    assert profiles["replay"] == Capabilities(free=True, recorded=True)
    assert capabilities_of(components.llms.get("scripted")).free


def test_a_profile_of_the_wrong_type_is_refused() -> None:
    class Loose:
        capabilities = ("free",)

    with pytest.raises(TypeError, match=r"not modulo\.llm\.base\.Capabilities"):
        capabilities_of(Loose())


def test_prompt_auto_follows_prefers_json() -> None:
    cfg = ModuloConfig()
    cfg.generator.prompt = "auto"
    cfg.llm.name = "local"
    assert resolve_prompt(cfg) == "json"
    cfg.llm.name = "openai"
    assert resolve_prompt(cfg) == "direct"


@pytest.mark.parametrize(("script", "cached"), [(["a"], False), (None, True)])
async def test_a_list_script_is_not_cacheable(tmp_path: object, script: list[str] | None, cached: bool) -> None:
    settings = LLMSettings(name="scripted", args={"replies": script} if script else {})
    client = build_client(settings, cache_mode="read-write", cache_dir=str(tmp_path))
    try:
        assert capabilities_of(client.backend).cacheable is cached
        assert (client.cache is not None) is cached
    finally:
        await client.aclose()
