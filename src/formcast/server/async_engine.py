"""AsyncEngine: one `LLM` driven by a background thread, fed and read from asyncio.

The engine is not thread-safe, so exactly one thread (``formcast-engine``) calls it. The event
loop talks to that thread through a command queue (``add``, ``abort``, ``abort_all``) and a
wake-up event; the thread answers through each request's ``asyncio.Queue``
(``loop.call_soon_threadsafe``, one call per engine step). Events a request's queue
receives, in order::

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

State the event loop reads without a lock (each value is one attribute, written by the engine
thread): `num_unfinished`, `num_free_blocks`, `num_waiting` (snapshots taken after every loop
iteration) and `busy_seconds` (how long the current iteration has run: the heartbeat a
stalled step shows up in). `abort_all` fails every request in flight and refuses later ones
with the same error (graceful shutdown's last step).
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
from formcast.grammar import Grammar
from formcast.grammar.spec import GrammarSpec
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
    scheduled_time: float | None = None  # start of the first step that computed it
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
        Where to record latencies, token counts and gauges (see `use_metrics`).
    """

    def __init__(self, llm: LLM, metrics: ServerMetrics | None = None) -> None:
        self.llm = llm
        self.compiler = llm.structured_output.compiler  # builds the vocabulary here, once
        self.compiler.observer = self
        self.vocab = llm.structured_output.vocab
        self._commands: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._wakeup = threading.Event()
        self._active: dict[str, EngineRequest] = {}
        self._unscheduled: dict[str, EngineRequest] = {}  # active, not computed by a step yet
        self._stopping = False
        self._refusal: APIError | None = None  # set by abort_all: every later add gets it
        self._busy_since: float | None = None  # start of the running loop iteration
        self._compiles_lock = threading.Lock()
        self._num_compiles_running = 0
        self._num_preemptions_seen = llm.scheduler.num_preemptions
        self._thread = threading.Thread(target=self._run, name="formcast-engine", daemon=True)
        self.num_free_blocks = llm.block_manager.num_free_blocks
        self.num_unfinished = 0
        self.num_waiting = 0
        self.use_metrics(metrics if metrics is not None else ServerMetrics())

    def use_metrics(self, metrics: ServerMetrics) -> None:
        """Record into ``metrics`` from now on (`create_app` gives each app its own)."""
        self.metrics = metrics
        metrics.kv_blocks_total.set(self.llm.block_manager.num_blocks)

    # -- event-loop side ---------------------------------------------------------------------

    def start(self) -> None:
        """Start the engine thread."""
        self._thread.start()

    @property
    def is_alive(self) -> bool:
        """True while the engine thread runs."""
        return self._thread.is_alive()

    @property
    def busy_seconds(self) -> float | None:
        """How long the engine thread's current loop iteration (commands + one step) has run;
        None while it sleeps for lack of work. A large value means a stalled step."""
        since = self._busy_since
        return None if since is None else time.monotonic() - since

    @property
    def num_active(self) -> int:
        """Requests the engine thread holds right now (live, unlike `num_unfinished`)."""
        return len(self._active)

    @property
    def num_grammar_compiles_running(self) -> int:
        """Grammar compilations of this engine running in the grammar threads."""
        return self._num_compiles_running

    async def compile_grammar(self, spec: GrammarSpec) -> Grammar:
        """The compiled grammar of ``spec``, compiled in the grammar threads (shared by key).

        Raises the compile error (``SchemaError``, ``GrammarLimitError``...) of the spec.
        """
        future = self.compiler.submit(spec)
        return await asyncio.wrap_future(future)

    def compile_started(self) -> None:
        """`CompileObserver`: a compile began."""
        self._count_compile(+1)

    def compile_finished(self, seconds: float) -> None:
        """`CompileObserver`: a compile ended after ``seconds``."""
        self.metrics.grammar_compiles.inc()
        self.metrics.grammar_compile_time.observe(seconds)
        self._count_compile(-1)

    def _count_compile(self, change: int) -> None:
        with self._compiles_lock:
            self._num_compiles_running += change
            self.metrics.grammar_compiles_running.set(self._num_compiles_running)

    def submit(self, request: EngineRequest) -> None:
        """Queue ``request`` for the engine; its events arrive on ``request.events``."""
        self._commands.put(("add", request))
        self._wakeup.set()

    def abort(self, request_id: str) -> None:
        """Abort a request (a no-op once it has finished); its KV blocks are freed."""
        self._commands.put(("abort", request_id))
        self._wakeup.set()

    def abort_all(self, error: APIError) -> None:
        """Fail every request in flight with ``error`` and refuse every later one with it.

        Each request's queue gets ``("error", request, error)``; their KV blocks are freed.
        """
        self._refusal = error
        self._commands.put(("abort_all", error))
        self._wakeup.set()

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop the thread (active requests get an error event), the grammar threads and the
        mask thread."""
        self._stopping = True
        self._wakeup.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        self.llm.structured_output.shutdown()
        if not self._thread.is_alive():  # the mask thread is only used by engine steps
            self.llm.mask_filler.shutdown()

    # -- engine thread -------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stopping:
            self._busy_since = time.monotonic()
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
                self._busy_since = None
                self._wakeup.wait()
                self._wakeup.clear()
            elif not self.llm.has_unfinished_requests() and not events:
                self._busy_since = None
                self._wakeup.wait(_IDLE_POLL_SECONDS)  # nothing to run: avoid a hot loop
                self._wakeup.clear()
        self._busy_since = None
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
            elif kind == "abort":
                self._abort(payload, events)
            else:
                self._fail_all(payload, events)

    def _add(self, request: EngineRequest, events: list) -> None:
        if self._refusal is not None:  # abort_all ran: the server is going away
            request.is_done = True
            events.append((request, ("error", request, self._refusal)))
            return
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
        self._unscheduled[request.request_id] = request
        events.append((request, ("accepted", request, None)))

    def _abort(self, request_id: str, events: list) -> None:
        request = self._active.pop(request_id, None)
        if request is None:
            return
        self._unscheduled.pop(request_id, None)
        self.llm.abort(request_id)
        self._finish(request, self.llm.take_output(request_id), events)

    def _step(self, events: list) -> None:
        begin = time.monotonic()
        try:
            deltas = self.llm.step()
        except Exception as exc:  # an engine bug must not take the server down
            logger.exception(
                "engine step failed; failing the %d active requests", len(self._active)
            )
            self._fail_all(api_error_from(exc), events)
            return
        if self._unscheduled:
            self._note_scheduled(begin)
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
                self._unscheduled.pop(request_id, None)
                self._finish(request, self.llm.take_output(request_id), events)

    def _note_scheduled(self, step_begin: float) -> None:
        """Requests the last step computed for the first time: queue time, prefix-cache use."""
        metrics = self.metrics
        for request_id, request in list(self._unscheduled.items()):
            state = self.llm.requests.get(request_id)
            if state is None or not any(seq.num_steps for seq in state.seqs):
                continue
            del self._unscheduled[request_id]
            request.scheduled_time = step_begin
            metrics.queue_time.observe(step_begin - request.arrival_time)
            metrics.prefix_cache_queries.inc(request.num_prompt_tokens)
            metrics.prefix_cache_hits.inc(state.seqs[0].num_prompt_hit_tokens)

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
        now = time.monotonic()
        metrics = self.metrics
        num_generated = sum(len(c.token_ids) for c in output.outputs)
        metrics.prompt_tokens.inc(len(output.prompt_token_ids))
        metrics.generation_tokens.inc(num_generated)
        metrics.request_prompt_tokens.observe(len(output.prompt_token_ids))
        metrics.request_generation_tokens.observe(num_generated)
        metrics.count_finished(str(output.finish_reason))
        metrics.request_latency.observe(now - request.arrival_time)
        if request.scheduled_time is not None:
            metrics.inference_time.observe(now - request.scheduled_time)
            if request.first_token_time is not None:
                metrics.prefill_time.observe(request.first_token_time - request.scheduled_time)
        if request.first_token_time is not None:
            decode_seconds = now - request.first_token_time
            metrics.decode_time.observe(decode_seconds)
            longest = max(len(c.token_ids) for c in output.outputs)
            if longest > 1:
                metrics.time_per_output_token.observe(decode_seconds / (longest - 1))
        events.append((request, ("done", request, output)))

    def _fail_all(self, error: APIError, events: list) -> None:
        for request_id, request in list(self._active.items()):
            del self._active[request_id]
            self._unscheduled.pop(request_id, None)
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
        metrics = self.metrics
        num_blocks = llm.block_manager.num_blocks
        self.num_free_blocks = llm.block_manager.num_free_blocks
        self.num_unfinished = len(self._active)
        self.num_waiting = len(scheduler.waiting)
        metrics.requests_running.set(len(scheduler.running))
        metrics.requests_waiting.set(self.num_waiting)
        metrics.kv_blocks_in_use.set(num_blocks - self.num_free_blocks)
        metrics.kv_cache_usage.set((num_blocks - self.num_free_blocks) / max(num_blocks, 1))
        if scheduler.num_preemptions != self._num_preemptions_seen:
            metrics.num_preemptions.inc(scheduler.num_preemptions - self._num_preemptions_seen)
            self._num_preemptions_seen = scheduler.num_preemptions

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
