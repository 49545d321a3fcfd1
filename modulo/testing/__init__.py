"""Test helpers shipped with modulo: a fault-injecting fake LLM provider."""

from .fake_server import FAULT_KINDS, FakeProvider, FakeRequest, FakeStats, fake_server_main

__all__ = ["FAULT_KINDS", "FakeProvider", "FakeRequest", "FakeStats", "fake_server_main"]
