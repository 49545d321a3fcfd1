"""``modulo.tools``: the schema validators a toolbox's calls build stay bounded."""

from __future__ import annotations

from typing import Any

import pytest

from modulo import tools
from modulo.tools import ToolArgumentError, Toolbox, ToolResult, ToolSpec


class FreshSpecs(Toolbox):
    """A toolbox that makes its specs anew at every ``specs()`` (a plugin may well do so)."""

    def specs(self) -> list[ToolSpec]:
        return [ToolSpec.strings("Echo", "Echo the text.", text="what to echo")]

    def _call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        return ToolResult(name, arguments, message=arguments["text"])


def test_a_toolbox_that_makes_its_specs_anew_does_not_grow_the_validator_cache(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tools, "_VALIDATORS_KEPT", 8, raising=False)
    box = FreshSpecs()
    for i in range(20):
        assert box.call("Echo", [f"hello {i}"]).text == f"hello {i}"
    assert len(tools._VALIDATORS) <= 8
    with pytest.raises(ToolArgumentError, match="Echo: text"):
        box.call("Echo", {"text": ""})  # validation still applies, with whichever validator is current
    spec = ToolSpec.strings("Kept", "A spec made once.", x="x")
    for _ in range(3):
        spec.bind(["a"])
        box.call("Echo", ["b"])
    assert tools._VALIDATORS[id(spec.parameters)].schema is spec.parameters  # a live spec keeps its own
