"""Concurrency and requests-per-minute limits, measured where they matter: at the server."""

from __future__ import annotations

import asyncio
import time

from modulo.llm.client import RateLimiter, build_client

from .support import ProviderFactory, openai_settings, request


async def test_concurrency_limit_is_observed_at_the_server(provider: ProviderFactory) -> None:
    fake = provider(latency_s=0.15)
    client = build_client(openai_settings(fake, concurrency=3))
    try:
        calls = await asyncio.gather(*(client.call(request(f"q{i}"), "generate") for i in range(9)))
    finally:
        await client.aclose()
    assert len(calls) == 9 and fake.stats().requests == 9
    assert fake.stats().max_in_flight == 3


async def test_retries_wait_for_a_free_slot(provider: ProviderFactory) -> None:
    fake = provider(latency_s=0.05, faults=["server_error", "server_error"])
    client = build_client(openai_settings(fake, concurrency=1))
    try:
        await asyncio.gather(*(client.call(request(f"q{i}"), "generate") for i in range(4)))
    finally:
        await client.aclose()
    assert fake.stats().max_in_flight == 1 and fake.stats().requests == 6


async def test_requests_per_minute_are_observed_at_the_server(provider: ProviderFactory) -> None:
    rpm, n = 600.0, 25  # 10 a second, a burst of at most one second's worth
    fake = provider()
    client = build_client(openai_settings(fake, requests_per_minute=rpm, concurrency=16))
    try:
        await client.call(request("warm-up"), "generate")  # the SDK's first request is slow to set up
        await asyncio.sleep(0.3)  # the bucket refills the warm-up's token (one every 104 ms)
        fake.reset_stats()
        sent = fake.elapsed()  # the server's clock when the burst starts, its bucket full
        await asyncio.gather(*(client.call(request(f"q{i}"), "generate") for i in range(n)))
    finally:
        await client.aclose()
    arrivals = fake.stats().arrivals
    assert len(arrivals) == n
    rate, burst = rpm / 60.0, 10
    # the i-th arrival cannot come before the bucket refilled for it, counted from the burst's start (a
    # request delayed on its way, as under load, only arrives later: counted from the first arrival, a
    # late first one made the bound fail)
    for i, at in enumerate(arrivals):
        assert at - sent >= (i + 1 - burst) / rate - 0.05, (i, at - sent)
    assert arrivals[-1] - arrivals[0] < (n - burst) / rate + 1.5  # and the limiter does not crawl either


async def test_token_bucket_spacing() -> None:
    limiter = RateLimiter(1200.0, burst=1)  # one every 50 ms
    started = time.monotonic()
    stamps = []
    for _ in range(6):
        await limiter.acquire()
        stamps.append(time.monotonic() - started)
    assert stamps[0] < 0.03
    assert stamps[-1] >= 5 * 0.05 - 0.01
