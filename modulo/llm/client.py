"""The client every caller uses: one backend wrapped in cache, limits, retries and accounting.

``build_client(settings)`` looks the backend up in the ``modulo.llms`` registry, binds its arguments
(an unknown one is an :class:`~modulo.errors.ArgumentError` before any call) and wraps it:

1. **cache** (``off`` / ``read-write`` / ``read-only``): a hit is answered without touching the
   backend; a read-only miss raises :class:`~modulo.errors.CacheMissError`.
2. **concurrency** (``settings.concurrency`` requests in flight) and **rate** (``settings.requests_per_minute``,
   a token bucket holding one second's worth of requests, so the rate holds over short windows too).
   Every attempt, retries included, passes both.
3. **retries** on :class:`~modulo.errors.TransientLLMError` (429, 5xx, timeouts, dropped
   connections, empty replies but those cut by the token limit or refused), driven by tenacity once a
   first attempt has failed: exponential backoff with jitter, or the server's Retry-After when it sent
   one, both capped by ``settings.max_backoff_s``; at most ``settings.max_retries`` retries.
   :class:`~modulo.errors.PermanentLLMError` is never retried.
4. **accounting**: tokens and dollars (price table in :mod:`modulo.llm.pricing`) per call and in
   total, failed attempts included when the server reported usage for them.

Usage fields of one :class:`~modulo.types.LLMCall`: ``calls`` is 1 when the call produced a reply
(from the backend or the cache) and 0 when it finally failed; ``failed_calls`` counts failed attempts
(each retry's failure and the last one); ``cached_calls`` is 1 for a cache hit, which costs
``cost_usd=0`` and records ``cached_cost_usd``, what it would have cost; its tokens are the recorded
reply's, so token budgets behave the same with or without the cache. A backend that answers from a
recording (``Capabilities(recorded=True)``: the replay backend) is accounted the same way as a cache hit.

On final failure the error is raised with ``.call``: the :class:`LLMCall` (``reply=None``) holding
the faults and the usage spent, so the caller can record them.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import random
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Container
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt

from .. import components
from ..binding import construct
from ..canonical import PromptHasher
from ..errors import CacheMissError, ConfigError, LLMError, PermanentLLMError, PluginLoadError, TransientLLMError
from ..redact import known as known_secrets
from ..redact import redact, redact_data, strip_userinfo
from ..registry import bind_arguments
from ..types import NO_USAGE, Fault, LLMCall, Stage, ToolCall, Usage, UsageTally, without_lone_surrogates
from .base import LLM, LLMRequest, LLMResponse, LLMSettings, capabilities_of
from .cache import CACHE_FILE, CACHE_MODES, CacheMode, ResponseCache
from .faults import EmptyReplyError
from .pricing import Price, lookup_price

log = logging.getLogger("modulo.llm")


_WARNED_UNPRICED: set[str] = set()


class RateLimiter:
    """A token bucket: ``per_minute`` requests a minute, at most ``burst`` at once (default: one second's worth).

    The burst comes out of the minute's allowance, and ``HEADROOM`` of it is kept in reserve for the
    uneven time requests take from here to the server: the bucket refills at
    ``per_minute * (1 - HEADROOM) - (burst - 1)`` a minute, so that no 60-second window at the server
    holds more than ``per_minute`` requests.
    """

    HEADROOM = 0.02

    def __init__(self, per_minute: float, *, burst: float | None = None) -> None:
        if per_minute <= 0:
            raise ConfigError(f"requests_per_minute must be positive, not {per_minute}")
        self.capacity = float(burst) if burst is not None else max(1.0, per_minute / 60.0)
        allowance = per_minute * (1.0 - self.HEADROOM) - (self.capacity - 1.0)
        self.rate = max(allowance, per_minute / 2.0) / 60.0
        self._tokens = self.capacity
        self._updated = time.monotonic()
        self._lock = asyncio.Lock()

    async def acquire(self) -> None:
        async with self._lock:  # waiters are served in arrival order
            while True:
                now = time.monotonic()
                self._tokens = min(self.capacity, self._tokens + (now - self._updated) * self.rate)
                self._updated = now
                if self._tokens >= 1.0:
                    self._tokens -= 1.0
                    return
                await asyncio.sleep((1.0 - self._tokens) / self.rate)


class CpuTurns:
    """Turns on the event loop's thread for work that can wait: one turn per pass of the loop, handed out in
    the order asked for, so whatever became ready meanwhile runs between two turns.

    A reply's processing (reformulation, critics run inline, records, the next prompt) is such work while
    other calls wait for a slot: taken one per pass, it lets the tasks woken for freed slots send their
    requests, and the replies that arrive meanwhile free theirs, before the next reply's processing starts
    (run back to back, the processing of replies that arrive together would hold every request behind it
    and every slot idle). A turn is no resource: the next one is handed out on the next pass whether or not
    the last is over, so a task cancelled while it waits, or while it holds one, holds nothing back."""

    def __init__(self) -> None:
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None  # set while the next turn is scheduled

    async def turn(self) -> None:
        """Return on a later pass of the loop, after the tasks that asked before."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiting.append(waiter)
        if self._loop is None:
            self._loop = loop
            loop.call_soon(self._next)
        await waiter

    def _next(self) -> None:
        waiting = self._waiting
        while waiting:
            waiter = waiting.popleft()
            if not waiter.done():  # (a cancelled waiter is passed over)
                waiter.set_result(None)
                break
        if waiting and self._loop is not None:
            self._loop.call_soon(self._next)
        else:
            self._loop = None


class Slots:
    """At most ``n`` calls in flight on one event loop, the waiting ones served in the order they came:
    :class:`asyncio.Semaphore`'s work, with a free slot taken at once (no coroutine, no look over the waiters
    for a cancelled one) and a freed slot handed straight to the next waiter (it cannot be taken by a call
    that came later)."""

    def __init__(self, n: int) -> None:
        #: slots free now (none is free while a call waits: a freed slot goes to a waiter)
        self.free = n
        self._waiting: deque[asyncio.Future[None]] = deque()

    def try_take(self) -> bool:
        """Hold a slot if one is free now (no coroutine); whether it did."""
        if self.free > 0:
            self.free -= 1
            return True
        return False

    async def take(self) -> None:
        """Hold a slot: at once when one is free, else when the calls that waited before have theirs."""
        if self.try_take():
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.give()  # handed a slot, then cancelled before it could use it: the next one has it
            raise

    def give(self) -> None:
        """Free a slot: the longest waiting call (not cancelled) gets it, else it is free."""
        waiting = self._waiting
        while waiting:
            waiter = waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self.free += 1


class RequestKeys:
    """:meth:`LLMRequest.key` for the requests of many problems, each problem's hashed by a
    :class:`~modulo.canonical.PromptHasher` of its own (the members before the messages as its head): a
    backprompt that starts with the problem's request resumes from the hash state after it, so the long
    request is neither escaped nor hashed again. The same keys; at most ``size`` problems remembered (the
    least recently asked for are forgotten, and their next key is hashed whole)."""

    def __init__(self, size: int = 128) -> None:
        self.size = size
        self._hashers: OrderedDict[tuple[str, bytes], PromptHasher] = OrderedDict()

    def key(self, request: LLMRequest, backend: str) -> str:
        return self.keyed(request, backend)[0]

    def keyed(self, request: LLMRequest, backend: str) -> tuple[str, PromptHasher | None]:
        """The key, and the hasher that made it (its :meth:`~PromptHasher.encoded_parts` are the messages'
        canonical JSON while it has hashed nothing since: what :meth:`messages_parts` asks it, with no second
        look at the request's members); no hasher when the request was hashed whole."""
        parts = request.key_parts(backend)
        if parts is None:
            return request.key(backend), None
        head, tail = parts
        who = (request.tags.get("problem_id", ""), head)
        hasher = self._hashers.get(who)
        if hasher is None:
            hasher = self._hashers[who] = PromptHasher(head)
            if len(self._hashers) > self.size:
                self._hashers.popitem(last=False)
        else:
            self._hashers.move_to_end(who)
        h = hasher.state(request.messages)
        h.update(tail)
        digest: str = h.hexdigest()
        return digest, hasher

    def messages_json(self, request: LLMRequest, backend: str) -> bytes | None:
        """The canonical JSON (UTF-8) of the messages of a request just keyed, joined from the escaped pieces
        its key was hashed from (what the response cache stores them as); None when they are not at hand."""
        parts = self.messages_parts(request, backend)
        return b"".join(parts) if parts is not None else None

    def messages_parts(self, request: LLMRequest, backend: str) -> list[bytes] | None:
        """:meth:`messages_json` in pieces, not joined (the response cache's writing thread joins them)."""
        parts = request.key_parts(backend)
        hasher = self._hashers.get((request.tags.get("problem_id", ""), parts[0])) if parts is not None else None
        return hasher.encoded_parts(request.messages) if hasher is not None else None


def attempt_id(process: str, problem_id: str) -> str:
    """The payer of the calls one attempt at a problem pays for: the attempting process (a token of the
    runner's, one per process of a run) and the problem, as the response cache stores it with the run."""
    return f"{process}.{hashlib.blake2b(problem_id.encode('utf-8'), digest_size=8).hexdigest()}"


def attempt_key(payer_id: str) -> int:
    """An :func:`attempt_id` as a set member of 8 bytes (the runner holds one per recorded attempt)."""
    return int.from_bytes(hashlib.blake2b(payer_id.encode("utf-8"), digest_size=8).digest(), "big")


@dataclass(frozen=True)
class Attempt:
    """The attempt at a problem that the calls made in this context belong to (set by the runner in
    :data:`ATTEMPT` for each problem it solves). ``recorded``: the :func:`attempt_key` of every earlier
    attempt of the run that is on record (its record counted what it paid)."""

    process: str
    payer_id: str
    recorded: Container[int] = frozenset()


#: the attempt the calls of this context are made for (None: outside a run's problem)
ATTEMPT: ContextVar[Attempt | None] = ContextVar("modulo_attempt", default=None)


class LLMClient:
    """Cache, limits, retries and accounting around one backend. See the module docstring."""

    def __init__(
        self,
        backend: LLM,
        settings: LLMSettings,
        *,
        backend_name: str | None = None,
        cache: ResponseCache | None = None,
        cache_mode: CacheMode = "off",
        backoff_base_s: float = 1.0,
        retry_empty: bool = True,
    ) -> None:
        if cache_mode not in CACHE_MODES:
            raise ConfigError(f"cache mode must be one of {', '.join(CACHE_MODES)}, not {cache_mode!r}")
        if cache_mode != "off" and cache is None:
            raise ConfigError(f"cache mode {cache_mode!r} needs a cache")
        if settings.concurrency < 1:
            raise ConfigError(f"llm.concurrency must be at least 1, not {settings.concurrency}")
        if settings.max_retries < 0:
            raise ConfigError(f"llm.max_retries must be >= 0, not {settings.max_retries}")
        if settings.timeout_s <= 0:
            raise ConfigError(f"llm.timeout_s must be positive, not {settings.timeout_s}")
        if settings.max_backoff_s < 0:
            raise ConfigError(f"llm.max_backoff_s must be >= 0, not {settings.max_backoff_s}")
        self.backend = backend
        self.settings = settings
        self.backend_name = backend_name or settings.name
        #: what the cache key calls the backend (its name and server URL)
        self.cache_id = (
            cache_identity(settings) if backend_name is None or backend_name == settings.name else backend_name
        )
        self.cache = cache
        self.cache_mode: CacheMode = cache_mode
        self.backoff_base_s = max(0.0, min(backoff_base_s, settings.max_backoff_s))
        self.retry_empty = retry_empty
        if settings.requests_per_minute is not None and settings.requests_per_minute <= 0:
            raise ConfigError(f"llm.requests_per_minute must be positive, not {settings.requests_per_minute}")
        self.backend_calls = 0
        #: whether a reply without usage was reported yet (once per client: a server may never send it)
        self._warned_no_usage = False
        #: models seen without a price (their dollars count as zero)
        self.unpriced_models: set[str] = set()
        #: the run this client's fresh calls are paid for (:meth:`pays_for`), and this process's own mark
        self._run: str | None = None
        self._process = uuid.uuid4().hex
        #: the cached replies whose dollars this client counted as spent (:meth:`_paid_by_this_run`)
        self._taken: set[str] = set()
        self._prices: dict[str, Price | None] = {}
        self._usage = UsageTally()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._slots: Slots | None = None
        #: turns for the work after a reply while other calls wait for a slot (:class:`CpuTurns`)
        self._turns = CpuTurns()
        self._limiter: RateLimiter | None = None
        #: calls waiting for a free slot
        self._queued = 0
        #: the cache keys of the requests, by the parts that changed since each problem's last one
        self._keys = RequestKeys()

    def __repr__(self) -> str:
        return (
            f"LLMClient(backend={self.backend_name!r}, model={self.settings.model!r}, "
            f"cache={self.cache_mode!r}, calls={self._usage.calls})"
        )

    @property
    def usage(self) -> Usage:
        """Running total over every call made through this client."""
        return self._usage.usage()

    # -- helpers ------------------------------------------------------------------------------------
    def _limits(self) -> tuple[Slots, RateLimiter | None]:
        loop = asyncio.get_running_loop()
        if self._slots is None or self._loop is not loop:  # the waiters' futures belong to one loop
            self._loop = loop
            self._slots = Slots(self.settings.concurrency)
            self._turns = CpuTurns()
            rpm = self.settings.requests_per_minute
            self._limiter = RateLimiter(rpm) if rpm else None
        return self._slots, self._limiter

    def _price(self, model: str) -> Price | None:
        if model in self._prices:
            return self._prices[model]
        price = self._prices[model] = lookup_price(model, self.settings)
        if price is None and model not in self.unpriced_models:
            self.unpriced_models.add(model)
            if not capabilities_of(self.backend).free and model not in _WARNED_UNPRICED:
                _WARNED_UNPRICED.add(model)
                log.warning(
                    "no price known for model %r: its calls count as $0 "
                    "(set llm.price_input_per_mtok / llm.price_output_per_mtok)",
                    model,
                )
        return price

    def pays_for(self, run: str) -> None:
        """Mark the replies this client stores in the response cache as paid by ``run`` (a run's identity,
        the same in every process of it): a reply of this run's earlier process (killed while a problem was
        being solved, or a problem run again) is paid, not saved, when the cache answers it here."""
        self._run = run

    @property
    def payer(self) -> str | None:
        """Who pays for this client's fresh calls, as the cache stores it (the attempt at a problem, or this
        process outside one, then the run)."""
        if self._run is None:
            return None
        attempt = ATTEMPT.get()
        return f"{self._process if attempt is None else attempt.payer_id}:{self._run}"

    def _paid_by_this_run(self, key: str, payer: str | None) -> bool:
        """Whether a cached reply's dollars are this attempt's spending: paid by this run in another of its
        processes, by an attempt at a problem that left no record (killed before it), so no record counted
        them. This attempt counts them then, once: the reply's payer becomes this attempt (:meth:`_take`). A
        reply paid by an attempt on record (a problem run again by ``run.retry_errors``: its earlier record
        counted them), by this process, or by another run is saved. Outside a run's problem (no
        :data:`ATTEMPT`) every reply of this run's other processes counts."""
        if payer is None or self._run is None or key in self._taken:
            return False
        who, _, run = payer.partition(":")
        if run != self._run or who == self._process:
            return False
        attempt = ATTEMPT.get()
        if attempt is None:
            return True
        return who.partition(".")[0] != attempt.process and attempt_key(who) not in attempt.recorded

    async def _take(self, key: str) -> None:
        """Make this attempt the payer of the cached reply ``key`` it counted (:meth:`_paid_by_this_run`), in
        the cache before the call returns, so before the attempt's record: a later process counts the reply
        again only if this attempt too leaves no record."""
        self._taken.add(key)
        if ATTEMPT.get() is None or self.cache is None or self.cache_mode == "read-only":
            return
        try:
            await self.cache.set_payer(key, self.payer)
        except Exception as exc:  # a broken cache must not stop the run
            log.warning("LLM cache: the payer of a reply could not be stored (%s: %s)", type(exc).__name__, exc)

    def unknown_cost_models(self) -> list[str]:
        """The models whose dollars this client cannot count (none for a free backend): those its calls
        met with no price known, and the configured model when it has none (a resumed run that makes no
        call still pays for them in its earlier calls). Their calls count as $0, so any cost figure that
        includes them is a lower bound, not a price."""
        if capabilities_of(self.backend).free:
            return []
        models = set(self.unpriced_models)
        if self.settings.model and self._price(self.settings.model) is None:
            models.add(self.settings.model)
        return sorted(models)

    def _cost(self, model: str, input_tokens: int, output_tokens: int, cached: int = 0, written: int = 0) -> float:
        price = self._price(model)
        return price.cost(input_tokens, output_tokens, cached, written) if price is not None else 0.0

    def prepare(self, request: LLMRequest, stage: Stage) -> LLMRequest:
        """``request`` with the settings' model, max_tokens and seed filled in where unset, and the stage tag."""
        update: dict[str, Any] = {}
        if not request.model and self.settings.model:
            update["model"] = self.settings.model
        if request.max_tokens is None and self.settings.max_tokens is not None:
            update["max_tokens"] = self.settings.max_tokens
        if request.seed is None and self.settings.seed is not None:
            update["seed"] = self.settings.seed
        if request.tags.get("stage") != stage:
            update["tags"] = {**request.tags, "stage": stage}
        return request.model_copy(update=update) if update else request

    def backoff(self, exc: BaseException | None, failures: int) -> float:
        """Seconds to wait after the ``failures``-th failed attempt: the server's Retry-After when it sent
        one, else ``backoff_base_s * 2**(failures-1)`` plus up to ``backoff_base_s`` of jitter; capped by
        ``settings.max_backoff_s``."""
        cap = self.settings.max_backoff_s
        retry_after = getattr(exc, "retry_after", None)
        if isinstance(retry_after, int | float) and retry_after >= 0:
            return float(min(retry_after, cap))
        delay = self.backoff_base_s * (2.0 ** max(0, failures - 1)) + random.uniform(0.0, self.backoff_base_s)
        return min(delay, cap)

    async def _retry(self, attempt: Callable[[], Awaitable[LLMResponse]], first: TransientLLMError) -> LLMResponse:
        """The retries after a first transient failure, driven by tenacity (at most ``max_retries`` more)."""

        def wait(state: RetryCallState) -> float:
            exc = state.outcome.exception() if state.outcome is not None else None
            return self.backoff(exc, state.attempt_number + 1)

        await asyncio.sleep(self.backoff(first, 1))
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.settings.max_retries),
            wait=wait,
            retry=retry_if_exception_type(TransientLLMError),
            reraise=True,
        )
        response: LLMResponse = await retrying(attempt)
        return response

    # -- the call -----------------------------------------------------------------------------------
    async def call(self, request: LLMRequest, stage: Stage) -> LLMCall:
        """One logical call: cache, then attempts with retries. Raises an LLMError carrying ``.call``."""
        request = self.prepare(request, stage)
        started = time.monotonic()
        capabilities = capabilities_of(self.backend)
        faults: list[Fault] = []
        spent = NO_USAGE  # what failed attempts cost (a new Usage only when one fails)
        key, hasher = (
            self._keys.keyed(request, self.cache_id)
            if self.cache is not None and self.cache_mode != "off"
            else ("", None)
        )

        if key:
            assert self.cache is not None
            try:
                hit = await self.cache.get(key)
            except Exception as exc:  # a broken cache must not stop the run: treat as a miss
                log.warning("LLM cache lookup failed (%s: %s); calling the backend", type(exc).__name__, exc)
                hit = None
            if hit is not None:
                would_cost = self._cost(hit.model or request.model, hit.input_tokens, hit.output_tokens)
                paid = self._paid_by_this_run(key, hit.payer)  # by this run, counted in no record: spent
                if paid:
                    await self._take(key)
                usage = Usage(
                    calls=1,
                    cached_calls=1,
                    input_tokens=hit.input_tokens,
                    output_tokens=hit.output_tokens,
                    cost_usd=would_cost if paid else 0.0,
                    cached_cost_usd=0.0 if paid else would_cost,
                )
                call = LLMCall(
                    stage=stage,
                    messages=list(request.messages),
                    reply=hit.text,
                    tool_calls=_tool_calls_of(hit.tool_calls),
                    model=hit.model,
                    usage=usage,
                    cached=True,
                    finish_reason=hit.finish_reason,
                    seconds=time.monotonic() - started,
                )
                self._usage.add(usage)
                return call
            if self.cache_mode == "read-only":
                error = CacheMissError(
                    f"the LLM response cache {str(self.cache.path)!r} (read-only) holds no reply for this "
                    f"{stage} request (problem {request.tags.get('problem_id', '?')!r}, backend "
                    f"{self.backend_name!r}, model {request.model!r}, sample {request.sample_index}); "
                    "run with cache.mode=read-write to call the model"
                )
                raise self._fail(error, request, stage, faults, spent, started)

        async def attempt() -> LLMResponse:
            nonlocal spent
            number = len(faults) + 1
            try:
                response = _scrubbed(_valid_text(await self._send(request, capabilities.bounded)))
                # (a reply cut empty by the token limit, or a refusal, is no accident but what the model answers:
                # sent again, it is cut or refused again and paid again, or it is a fresh draw passed off as an
                # attempt; it goes back as it is, its finish_reason telling why it is empty)
                if (
                    self.retry_empty
                    and not response.text.strip()
                    and not response.tool_calls
                    and response.finish_reason not in _MODEL_ENDED
                ):
                    raise EmptyReplyError(
                        f"the model returned an empty reply (finish_reason={response.finish_reason!r})",
                        usage=response.usage,
                        model=response.model,
                    )
                return response
            except LLMError as exc:
                failed_usage: Usage | None = getattr(exc, "usage", None)
                tokens_in = failed_usage.input_tokens if failed_usage else 0
                tokens_out = failed_usage.output_tokens if failed_usage else 0
                model = getattr(exc, "model", "") or request.model
                cost = self._cost(model, tokens_in, tokens_out) if failed_usage else 0.0
                spent = spent + Usage(failed_calls=1, input_tokens=tokens_in, output_tokens=tokens_out, cost_usd=cost)
                faults.append(Fault(kind=exc.fault, message=redact(str(exc)), attempt=number, stage=stage))
                if isinstance(exc, TransientLLMError) and number <= self.settings.max_retries:
                    log.info(
                        "%s call for problem %r failed (%s, attempt %d of %d), retrying: %s",
                        stage,
                        request.tags.get("problem_id", "?"),
                        exc.fault,
                        number,
                        self.settings.max_retries + 1,
                        exc,
                    )
                raise

        try:
            try:  # the common case, a first attempt that works, needs no retry machinery
                response = await attempt()
            except TransientLLMError as first:
                if self.settings.max_retries < 1:
                    raise
                response = await self._retry(attempt, first)
        except LLMError as exc:
            raise self._fail(exc, request, stage, faults, spent, started) from None

        response, insane = _sane_usage(response)
        if insane is not None:  # recorded as a fault; its figures are not added to tokens or cost
            log.warning("%s call for problem %r: %s", stage, request.tags.get("problem_id", "?"), insane)
            faults.append(Fault(kind="bad_usage", message=insane, attempt=len(faults) + 1, stage=stage))
        if not response.usage_reported:  # recorded as a fault: its tokens and dollars are unknown, not zero
            faults.append(Fault(kind="no_usage", message=NO_USAGE_NOTE, attempt=len(faults) + 1, stage=stage))
            if not self._warned_no_usage:
                self._warned_no_usage = True
                log.warning(
                    "%s backend, model %r: %s", self.backend_name, response.model or request.model, NO_USAGE_NOTE
                )
        model = response.model or request.model
        cost = self._cost(
            model,
            response.usage.input_tokens,
            response.usage.output_tokens,
            response.cached_input_tokens,
            response.cache_write_tokens,
        )
        # a backend that answers from a recording (replay) is accounted like a cache hit: free, with
        # what the recorded call would cost now
        recorded = capabilities.recorded
        usage = Usage(
            calls=1,
            cached_calls=1 if recorded else 0,
            input_tokens=response.usage.input_tokens,
            output_tokens=response.usage.output_tokens,
            cost_usd=0.0 if recorded else cost,
            cached_cost_usd=cost if recorded else 0.0,
        )
        if spent is not NO_USAGE:
            usage = spent + usage
        if key and self.cache_mode == "read-write":
            assert self.cache is not None
            try:
                await self.cache.put(
                    key,
                    payer=self.payer,
                    backend=self.backend_name,
                    request=request,
                    # the pieces its key was hashed from (None: no longer at hand), joined by the writing thread
                    messages_json=hasher.encoded_parts(request.messages) if hasher is not None else None,
                    text=response.text,
                    model=model,
                    finish_reason=response.finish_reason,
                    input_tokens=response.usage.input_tokens,
                    output_tokens=response.usage.output_tokens,
                    tool_calls=(
                        json.dumps([c.model_dump(mode="json") for c in response.tool_calls])
                        if response.tool_calls
                        else None
                    ),
                )
            except Exception as exc:  # the reply is paid for: keep it even if the cache cannot
                log.warning("LLM cache write failed (%s: %s); the reply is used uncached", type(exc).__name__, exc)
        call = LLMCall(
            stage=stage,
            messages=list(request.messages),
            reply=response.text,
            tool_calls=list(response.tool_calls),
            model=model,
            usage=usage,
            cached=recorded,
            finish_reason=response.finish_reason,
            faults=faults,
            seconds=time.monotonic() - started,
        )
        self._usage.add(usage)
        return call

    async def _send(self, request: LLMRequest, bounded: bool) -> LLMResponse:
        """One attempt: a slot (and the rate's token), the backend's reply. ``bounded``: the backend declares
        that it returns within ``timeout_s`` (:class:`~modulo.llm.base.Capabilities`)."""
        slots, limiter = self._limits()
        if not slots.try_take():  # every slot is taken (the usual case: one is free, taken at once)
            self._queued += 1
            try:
                await slots.take()
            finally:
                self._queued -= 1
        try:
            if limiter is not None:
                await limiter.acquire()
            self.backend_calls += 1
            # the backend enforces timeout_s itself; this outer guard catches a backend that does not (a
            # backend that cannot wait past it, such as a script, declares itself bounded and needs none)
            guard = self.settings.timeout_s * 1.5 + 1.0
            try:
                if bounded:
                    return await self.backend.complete(request)
                async with asyncio.timeout(guard):
                    return await self.backend.complete(request)
            except TimeoutError:
                raise TransientLLMError(
                    f"no reply from the {self.backend_name} backend within {guard:.1f}s", fault="timeout"
                ) from None
            except LLMError:
                raise
            except Exception as exc:
                raise PermanentLLMError(
                    f"the {self.backend_name} backend crashed: {type(exc).__name__}: {exc}"
                ) from exc
        finally:
            slots.give()
            if self._queued:
                # other calls wait for a slot: this reply's processing (critique, backprompt) takes its turn
                # after the task woken for the freed slot has sent its request, one reply per pass of the
                # loop (see CpuTurns)
                await self._turns.turn()

    def _fail(
        self,
        exc: LLMError,
        request: LLMRequest,
        stage: Stage,
        faults: list[Fault],
        spent: Usage,
        started: float,
    ) -> LLMError:
        if not faults or faults[-1].message != redact(str(exc)):
            faults = [*faults, Fault(kind=exc.fault, message=redact(str(exc)), attempt=len(faults) + 1, stage=stage)]
        call = LLMCall(
            stage=stage,
            messages=list(request.messages),
            reply=None,
            model=request.model,
            usage=spent,
            faults=faults,
            seconds=time.monotonic() - started,
        )
        exc.call = call
        self._usage.add(spent)
        log.warning(
            "%s call for problem %r failed for good after %d attempt(s): %s",
            stage,
            request.tags.get("problem_id", "?"),
            spent.failed_calls,
            exc,
        )
        return exc

    async def start(self) -> None:
        """Start the backend ahead of the first call when it has a start step (a local server)."""
        start = getattr(self.backend, "start", None)
        if start is not None:
            await start()

    async def aclose(self) -> None:
        try:
            await self.backend.aclose()
        finally:
            if self.cache is not None:
                self.cache.close()


def cache_identity(settings: LLMSettings) -> str:
    """What the cache key calls the backend: its name, plus the server's URL when one is set, so a
    fake or local server's replies are never served for another endpoint's requests."""
    return settings.name + (f"@{strip_userinfo(settings.base_url).rstrip('/')}" if settings.base_url else "")


#: finish reasons of an empty reply that the model meant (not retried): cut by the token limit, refused
_MODEL_ENDED = frozenset({"length", "refusal"})

#: the fault of a reply whose server reported no usage
NO_USAGE_NOTE = "the server reported no token usage for this reply: its tokens and dollars are not counted"

#: more tokens than any model reads or writes in one call: a usage figure past it is a server fault
MAX_SANE_TOKENS = 100_000_000


def _sane_usage(response: LLMResponse) -> tuple[LLMResponse, str | None]:
    """``response`` with its usage zeroed, and why, when the server reported a negative or absurd figure
    (a negative cost would let a run slip past its dollar budget; 1e30 tokens overflow the cache)."""
    u = response.usage
    if 0 <= u.input_tokens <= MAX_SANE_TOKENS and 0 <= u.output_tokens <= MAX_SANE_TOKENS:
        return response, None  # the common case: no dictionary of figures made
    figures = {"input_tokens": u.input_tokens, "output_tokens": u.output_tokens}
    bad = {k: v for k, v in figures.items() if not 0 <= v <= MAX_SANE_TOKENS}
    shown = ", ".join(f"{k}={v!r}" for k, v in bad.items())
    message = f"the server reported impossible usage ({shown}); not counted"
    return response.model_copy(update={"usage": Usage()}), message


def _scrubbed(response: LLMResponse) -> LLMResponse:
    """``response`` with every known secret redacted from its text (a server may echo a header or a
    key): scanned before it is cached, recorded or quoted back to the model in a backprompt."""
    if not known_secrets():
        return response
    text = redact(response.text)
    calls = [_scrubbed_call(c) for c in response.tool_calls]  # tool arguments are recorded and cached too
    if text == response.text and calls == response.tool_calls:
        return response
    return response.model_copy(update={"text": text, "tool_calls": calls})


def _scrubbed_call(call: ToolCall) -> ToolCall:
    arguments = redact_data(call.arguments)
    raw = redact(call.raw_arguments) if call.raw_arguments is not None else None
    if arguments == call.arguments and raw == call.raw_arguments:
        return call
    return call.model_copy(update={"arguments": arguments, "raw_arguments": raw})


def _tool_calls_of(stored: str | None) -> list[ToolCall]:
    """The tool calls a cache entry holds (its JSON column), or none."""
    if not stored:
        return []
    return [ToolCall.model_validate(item) for item in json.loads(stored)]


def _valid_text(response: LLMResponse) -> LLMResponse:
    """``response`` with each lone surrogate in its text replaced by U+FFFD: such text (a provider's
    JSON may carry a half emoji as an escape) cannot be written as UTF-8, so the paid reply could be
    neither cached nor recorded."""
    if response.text.isascii():
        return response
    try:
        response.text.encode("utf-8")
    except UnicodeEncodeError:
        return response.model_copy(update={"text": without_lone_surrogates(response.text)})
    return response


def build_client(
    settings: LLMSettings,
    *,
    cache_mode: CacheMode = "off",
    cache_dir: Path | None = None,
) -> LLMClient:
    """The backend named ``settings.name`` with its ``settings.args`` bound, wrapped in an :class:`LLMClient`.

    ``cache_dir`` is a directory (the file ``llm-cache.sqlite`` in it) or a ``.sqlite`` file; the default
    is :func:`modulo.settings.cache_dir`.
    """
    if cache_mode not in CACHE_MODES:
        raise ConfigError(f"cache mode must be one of {', '.join(CACHE_MODES)}, not {cache_mode!r}")
    factory = components.llms.get(settings.name)
    kwargs = bind_arguments("llm backend", settings.name, factory, settings.args, inject={"settings": settings})
    backend = construct("llm backend", settings.name, factory, kwargs)  # a constructor's failure names it
    missing = [hook for hook in ("complete", "aclose") if not callable(getattr(backend, hook, None))]
    if missing:  # found now, before any call, not as a crash of every problem's first call
        entry = components.llms.entries().get(settings.name)
        source = f"from {entry.distribution or 'unknown distribution'}" if entry is not None else "registered"
        raise PluginLoadError(
            f"llm backend {settings.name!r} ({source}) made a {type(backend).__name__}, which lacks "
            f"{' and '.join(missing)}: a backend needs async complete(request) and async aclose()"
        )
    if not capabilities_of(backend).cacheable:
        cache_mode = "off"  # a script's replies depend on call order, not on the request alone
    cache: ResponseCache | None = None
    if cache_mode != "off":
        path: Path | None = None
        if cache_dir is not None:
            cache_dir = Path(cache_dir).expanduser()
            path = cache_dir if cache_dir.suffix in (".sqlite", ".db") else cache_dir / CACHE_FILE
        cache = ResponseCache(path, readonly=cache_mode == "read-only")
    return LLMClient(
        backend,
        settings,
        backend_name=settings.name,
        cache=cache,
        cache_mode=cache_mode,
        backoff_base_s=settings.backoff_base_s,
    )
