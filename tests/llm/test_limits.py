"""Concurrency and requests-per-minute limits, measured where they matter: at the server."""

from __future__ import annotations

import asyncio
import time

from modulo.llm.base import LLMRequest, LLMSettings
from modulo.llm.client import CpuTurns, RateLimiter, Slots, build_client

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


async def test_cpu_turns_are_one_per_pass_of_the_loop_in_the_order_asked() -> None:
    turns = CpuTurns()
    loop = asyncio.get_running_loop()
    passes = 0
    ticking = True

    def tick() -> None:  # counts the loop's passes: one call per pass
        nonlocal passes
        passes += 1
        if ticking:
            loop.call_soon(tick)

    got: list[tuple[str, int]] = []

    async def ask(name: str) -> None:
        await turns.turn()
        got.append((name, passes))

    loop.call_soon(tick)
    await asyncio.sleep(0)
    tasks = [asyncio.ensure_future(ask(n)) for n in "abcd"]
    await asyncio.sleep(0)  # every task waits for its turn now
    tasks[2].cancel()  # a task cancelled while it waits is passed over
    await asyncio.gather(*tasks, return_exceptions=True)
    ticking = False
    assert [name for name, _ in got] == ["a", "b", "d"]
    seen = [at for _, at in got]
    assert seen == sorted(set(seen)), "two turns in one pass"
    assert seen[-1] - seen[0] <= 3  # a cancelled waiter costs no turn: b then d on the next passes


async def test_replies_that_arrive_together_free_their_slots_before_either_is_processed() -> None:
    """Two calls in flight, two waiting: both replies come in one pass; the two waiting requests are sent
    (the script sees them) before the first reply's caller goes on with its own work."""
    events: list[str] = []
    answered = asyncio.Event()

    async def answer(req: LLMRequest) -> str:
        events.append(f"sent {req.messages[0].content}")
        if len(events) == 2:  # a and b are in flight, c and d wait for a slot: both replies at once
            asyncio.get_running_loop().call_later(0.01, answered.set)
        await answered.wait()
        return "ok"

    client = build_client(LLMSettings(name="scripted", concurrency=2, args={"fn": answer}))

    async def one(name: str) -> None:
        await client.call(request(name), "generate")
        events.append(f"processed {name}")

    try:
        await asyncio.gather(*(one(n) for n in "abcd"))
    finally:
        await client.aclose()
    assert events[:2] == ["sent a", "sent b"]
    assert events.index("sent c") < events.index("processed a")
    assert events.index("sent d") < events.index("processed a")


async def test_slots_hold_at_most_n_and_serve_the_waiting_calls_in_order_through_cancellations() -> None:
    """The client's slots: a free one is taken at once; the waiting calls get theirs in the order they came,
    a call cancelled while it waits holds none, and one cancelled after it was handed a slot passes it on."""
    slots = Slots(2)
    order: list[str] = []
    in_flight = peak = 0

    async def call(name: str, hold: float) -> None:
        nonlocal in_flight, peak
        await slots.take()
        in_flight += 1
        peak = max(peak, in_flight)
        order.append(name)
        try:
            await asyncio.sleep(hold)
        finally:
            in_flight -= 1
            slots.give()

    first = [asyncio.ensure_future(call(n, 0.02)) for n in "ab"]
    await asyncio.sleep(0)
    assert slots.free == 0
    waiting = [asyncio.ensure_future(call(n, 0.0)) for n in "cdefg"]
    await asyncio.sleep(0)
    waiting[1].cancel()  # d: cancelled while it waits
    await asyncio.gather(*first, *waiting, return_exceptions=True)
    assert order == ["a", "b", "c", "e", "f", "g"] and peak == 2 and slots.free == 2

    # handed a slot, cancelled before it ran: the slot goes to the next waiter, none is lost
    slots = Slots(1)
    await slots.take()
    handed = asyncio.ensure_future(slots.take())
    after = asyncio.ensure_future(slots.take())
    await asyncio.sleep(0)
    slots.give()  # to `handed`, which has not run yet
    handed.cancel()
    await asyncio.sleep(0)
    await asyncio.wait_for(after, 1.0)  # it got the slot `handed` passed on
    assert handed.cancelled() and slots.free == 0
    slots.give()
    assert slots.free == 1
