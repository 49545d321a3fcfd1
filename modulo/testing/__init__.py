"""Test helpers shipped with modulo: model doubles (a function-backed and a scripted model) and a
fault-injecting fake LLM provider on 127.0.0.1 that serves them (or its own script) over HTTP."""

from .fake_server import FAULT_KINDS, FakeProvider, FakeRequest, FakeStats
from .models import FunctionModel, ScriptedModel

__all__ = [
    "FAULT_KINDS",
    "FakeProvider",
    "FakeRequest",
    "FakeStats",
    "FunctionModel",
    "ScriptedModel",
]
