"""AsyncEngine: one `LLM` driven by a background thread, fed and read from asyncio.

The engine is not thread-safe, so exactly one thread (``formcast-engine``) calls it. The event
loop talks to that thread through a command queue (``add``, ``abort``) and a wake-up event;
the thread answers through each request's ``asyncio.Queue`` (``loop.call_soon_threadsafe``,
one call per engine step). Events a request's queue receives, in order::

    ("accepted", request, None)         the engine took the request (prompt tokens counted)
    ("delta", request, StreamDelta)     new tokens / text of one completion (0 or more)
    ("done", request, RequestOutput)    finished; the engine has forgotten the request
    ("error", request, APIError)        refused or failed; nothing follows

The thread loops: run pending commands; if requests are active, ``step()`` and dispatch the
deltas, then hand out every finished request (``take_output``: its blocks are already free);
otherwise sleep until a command arrives. After a ``step()`` every delta of a finished
request has been returned (deltas of requests finished outside a step come at the start of
the next one), so ``done`` always follows the last delta.

Grammars compile in the engine's grammar thread pool before the request is submitted
(`compile_grammar` awaits the shared future), so a schema error becomes a 400 before any
token is generated and the event loop never blocks on compilation.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from formcast.engine.llm_engine import LLM
from formcast.engine.outputs import RequestOutput, StreamDelta
from formcast.engine.prompt import Prompt
from formcast.grammar import Grammar, Vocabulary
from formcast.grammar.spec import CompileFn, GrammarSpec
from formcast.samplers import SamplingParams
from formcast.server.errors import APIError, api_error_from, context_length_exceeded
from formcast.server.metrics import ServerMetrics

logger = logging.getLogger("formcast.server")
_IDLE_POLL_SECONDS = 0.05


@dataclass(eq=False)
class EngineRequest:
    """One engine request as the server tracks it.

    ``events`` receives the events listed in the module docstring; several requests may share
    one queue (a batch of prompts), ``tag`` tells them apart.
    """

    request_id: str
    prompt: Prompt
    params: SamplingParams
    events: asyncio.Queue
    loop: asyncio.AbstractEventLoop
    grammar: Grammar | None = None
    grammar_param: str | None = None
    jump_forward: bool | None = None
    tag: Any = None
    is_max_tokens_explicit: bool = False
    arrival_time: float = field(default_factory=time.monotonic)
    num_prompt_tokens: int = 0
    first_token_time: float | None = None
    last_output_times: dict[int, float] = field(default_factory=dict)
    is_done: bool = False


class AsyncEngine:
    """Serve one `LLM` to asyncio code (see the module docstring).

    Parameters
    ----------
    llm : LLM
        The engine; from now on only this object's thread may call it.
    metrics : ServerMetrics, optional
        Where to record latencies, token counts and gauges.
    """

    def __init__(self, llm: LLM, metrics: ServerMetrics | None = None) -> None:
        self.llm = llm
        self.metrics = metrics if metrics is not None else ServerMetrics()
        self.compiler = llm.structured_output.compiler  # builds the vocabulary here, once
        self.vocab = llm.structured_output.vocab
        self.metrics.kv_blocks_total.set(llm.block_manager.num_blocks)
        self._commands: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._wakeup = threading.Event()
        self._active: dict[str, EngineRequest] = {}
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="formcast-engine", daemon=True)
        self.num_free_blocks = llm.block_manager.num_free_blocks
        self.num_unfinished = 0

    # -- event-loop side ---------------------------------------------------------------------

    def start(self) -> None:
        """Start the engine thread."""
        self._thread.start()

    @property
    def is_alive(self) -> bool:
        """True while the engine thread runs."""
        return self._thread.is_alive()

    async def compile_grammar(self, spec: GrammarSpec) -> Grammar:
        """The compiled grammar of ``spec``, compiled in the grammar threads (shared by key).

        Raises the compile error (``SchemaError``, ``GrammarError``...) of the spec.
        """
        timed = GrammarSpec(spec.key, self._timed(spec.compile_fn), spec.description)
        future = self.compiler.submit(timed)
        return await asyncio.wrap_future(future)

    def _timed(self, compile_fn: CompileFn) -> CompileFn:
        def run(vocab: Vocabulary) -> Grammar:
            begin = time.perf_counter()
            try:
                return compile_fn(vocab)
            finally:
                self.metrics.grammar_compiles.inc()
                self.metrics.grammar_compile_time.observe(time.perf_counter() - begin)

        return run

    def submit(self, request: EngineRequest) -> None:
        """Queue ``request`` for the engine; its events arrive on ``request.events``."""
        self._commands.put(("add", request))
        self._wakeup.set()

    def abort(self, request_id: str) -> None:
        """Abort a request (a no-op once it has finished); its KV blocks are freed."""
        self._commands.put(("abort", request_id))
        self._wakeup.set()

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop the thread (active requests get an error event) and the grammar threads."""
        self._stopping = True
        self._wakeup.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        self.llm.structured_output.shutdown()

    # -- engine thread -------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stopping:
            events: list[tuple[EngineRequest, tuple[str, EngineRequest, Any]]] = []
            try:
                self._run_commands(events)
                if self._active:
                    self._step(events)
                self._update_gauges()
            except Exception as exc:  # keep serving: fail what is in flight, log the bug
                logger.exception("engine loop error; failing %d active requests", len(self._active))
                self._fail_all(api_error_from(exc), events)
            self._post(events)
            if not self._active:
                self._wakeup.wait()
                self._wakeup.clear()
            elif not self.llm.has_unfinished_requests() and not events:
                self._wakeup.wait(_IDLE_POLL_SECONDS)  # nothing to run: avoid a hot loop
                self._wakeup.clear()
        events = []
        self._run_commands(events)
        self._fail_all(APIError(503, "the server is shutting down", "server_error"), events)
        self._post(events)

    def _run_commands(self, events: list) -> None:
        while True:
            try:
                kind, payload = self._commands.get_nowait()
            except queue.Empty:
                return
            if kind == "add":
                self._add(payload, events)
            else:
                self._abort(payload, events)

    def _add(self, request: EngineRequest, events: list) -> None:
        llm = self.llm
        try:
            _, token_ids = llm.encode_prompt(request.prompt)
            limit = llm.config.max_model_len
            max_tokens = request.params.max_tokens if request.is_max_tokens_explicit else None
            if len(token_ids) >= limit or len(token_ids) + (max_tokens or 0) > limit:
                raise context_length_exceeded(len(token_ids), max_tokens, limit)
            llm.add_request(
                token_ids,
                request.params,
                request_id=request.request_id,
                grammar=request.grammar,
                jump_forward=request.jump_forward,
            )
        except Exception as exc:  # refused: report it to the request, keep serving
            request.is_done = True
            events.append((request, ("error", request, api_error_from(exc, request.grammar_param))))
            return
        request.num_prompt_tokens = len(token_ids)
        self._active[request.request_id] = request
        events.append((request, ("accepted", request, None)))

    def _abort(self, request_id: str, events: list) -> None:
        request = self._active.pop(request_id, None)
        if request is None:
            return
        self.llm.abort(request_id)
        self._finish(request, self.llm.take_output(request_id), events)

    def _step(self, events: list) -> None:
        try:
            deltas = self.llm.step()
        except Exception as exc:  # an engine bug must not take the server down
            logger.exception(
                "engine step failed; failing the %d active requests", len(self._active)
            )
            self._fail_all(api_error_from(exc), events)
            return
        now = time.monotonic()
        for delta in deltas:
            request = self._active.get(delta.request_id)
            if request is None:
                continue
            if delta.token_ids:
                self._record_latency(request, delta, now)
            events.append((request, ("delta", request, delta)))
        for request_id, request in list(self._active.items()):
            state = self.llm.requests.get(request_id)
            if state is not None and state.is_finished:
                del self._active[request_id]
                self._finish(request, self.llm.take_output(request_id), events)

    def _record_latency(self, request: EngineRequest, delta: StreamDelta, now: float) -> None:
        metrics = self.metrics
        if request.first_token_time is None:
            request.first_token_time = now
            metrics.time_to_first_token.observe(now - request.arrival_time)
        last = request.last_output_times.get(delta.index)
        if last is not None:
            metrics.inter_token_latency.observe((now - last) / len(delta.token_ids))
        request.last_output_times[delta.index] = now

    def _finish(self, request: EngineRequest, output: RequestOutput, events: list) -> None:
        request.is_done = True
        metrics = self.metrics
        metrics.prompt_tokens.inc(len(output.prompt_token_ids))
        metrics.generation_tokens.inc(sum(len(c.token_ids) for c in output.outputs))
        metrics.requests_finished.inc(finish_reason=str(output.finish_reason))
        metrics.request_latency.observe(time.monotonic() - request.arrival_time)
        events.append((request, ("done", request, output)))

    def _fail_all(self, error: APIError, events: list) -> None:
        for request_id, request in list(self._active.items()):
            del self._active[request_id]
            request.is_done = True
            try:
                self.llm.abort(request_id)
                self.llm.take_output(request_id)
            except Exception:  # the engine may be in a broken state; the client gets the error
                logger.exception("could not abort request %s", request_id)
            events.append((request, ("error", request, error)))

    def _update_gauges(self) -> None:
        llm = self.llm
        scheduler = llm.scheduler
        self.num_free_blocks = llm.block_manager.num_free_blocks
        self.num_unfinished = len(self._active)
        self.metrics.requests_running.set(len(scheduler.running))
        self.metrics.requests_waiting.set(len(scheduler.waiting))
        self.metrics.kv_blocks_in_use.set(llm.block_manager.num_blocks - self.num_free_blocks)

    @staticmethod
    def _post(events: list) -> None:
        """Deliver events to their queues, one ``call_soon_threadsafe`` per event loop."""
        by_loop: dict[asyncio.AbstractEventLoop, list] = {}
        for request, event in events:
            by_loop.setdefault(request.loop, []).append((request.events, event))
        for loop, items in by_loop.items():
            try:
                loop.call_soon_threadsafe(_deliver, items)
            except RuntimeError:  # the loop is closed: nobody is listening any more
                pass


def _deliver(items: list[tuple[asyncio.Queue, Any]]) -> None:
    for events, event in items:
        events.put_nowait(event)
