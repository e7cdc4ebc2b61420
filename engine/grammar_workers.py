"""GrammarWorkers: grammar compiles in child processes, under hard time and memory budgets.

A compile running in a thread of the serving process shares its interpreter and heap: past
its budget inside native code it cannot be stopped, the memory it took is not given back to
the OS, and its Python work takes turns on the GIL with the engine and the event loop. A
worker process has none of these problems: it can be ended at any moment and its memory goes
with it.

Protocol. Each worker is a spawned process that holds the engine's vocabulary and answers
one job at a time on its pipe. The parent sends ``(recipe, cache_dir)``; the worker rebuilds
the spec (:class:`~formcast.grammar.spec.GrammarRecipe`), compiles it, which stores the
compiled grammar in the on-disk grammar cache (:mod:`formcast.grammar.index.grammar_cache`),
and answers ``("ok", seconds)`` or ``("error", error_state)``. The parent then runs the
spec's own ``compile_fn``, which finds the grammar on disk and only loads it: compiled
grammars never travel over the pipe.

Budgets. While a job runs the parent polls the pipe and the worker's resident memory
(``/proc/PID/statm``) every ``POLL_S``; past ``compile_timeout_s`` seconds, or past
``compile_memory_bytes`` above the worker's idle size, it kills the worker and raises
:class:`~formcast.errors.CompileBudgetError`. A worker left more than ``recycle_bytes`` above
its idle size after a job is replaced, so what a big compile took goes back to the OS. Workers
start on first use or with ``start_all`` (start-up, a few seconds: importing formcast and
loading the automaton kernels, is not part of any budget).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import multiprocessing
import os
import queue
import time
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from formcast.errors import CompileBudgetError, FormcastError
from formcast.grammar.index.grammar_cache import default_cache_dir
from formcast.grammar.index.vocabulary import Vocabulary
from formcast.grammar.limits import GrammarLimits
from formcast.grammar.spec import GrammarRecipe

logger = logging.getLogger(__name__)

POLL_S = 0.02
_START_TIMEOUT_S = 300.0  # spawning + importing formcast + warming kernels, cold disk
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


class GrammarWorkerError(FormcastError, RuntimeError):
    """A grammar worker failed in a way that is not the grammar's fault (a bug, a crash)."""


class GrammarWorkers:
    """A pool of grammar compile processes.

    Parameters
    ----------
    vocab : Vocabulary
        The vocabulary every compile is indexed over (sent to each worker once).
    num_workers : int
        Processes (compiles that run at once; more callers wait for a free one).
    limits : GrammarLimits
        ``compile_timeout_s`` and ``compile_memory_bytes`` are enforced per compile.
    recycle_bytes : int
        A worker this far above its idle resident size after a job is replaced.
    """

    def __init__(
        self,
        vocab: Vocabulary,
        num_workers: int,
        limits: GrammarLimits,
        recycle_bytes: int = 512 << 20,
    ) -> None:
        self.vocab = vocab
        self.limits = limits
        self.recycle_bytes = recycle_bytes
        self._context = multiprocessing.get_context("spawn")
        self._idle: queue.SimpleQueue[_Worker | None] = queue.SimpleQueue()
        for _ in range(num_workers):
            self._idle.put(None)  # a slot; its process starts on first use
        self.num_workers = num_workers
        self.num_killed = 0  # workers ended for a budget
        self.num_recycled = 0  # workers replaced for their size after a job

    def compile(self, recipe: GrammarRecipe) -> float:
        """Compile ``recipe`` in a worker (result left in the disk cache); its seconds.

        Raises
        ------
        CompileBudgetError
            The compile ran past ``compile_timeout_s`` or ``compile_memory_bytes``.
        GrammarError, SchemaError, ...
            The compile's own error, rebuilt from the worker's answer.
        GrammarWorkerError
            The worker crashed or failed on something that is not a grammar error.
        """
        worker = self._idle.get()
        try:
            if worker is None:
                worker = _Worker.start(self._context, self.vocab)
            answer = worker.run(recipe, self.limits)
            if worker.is_alive and worker.grown_bytes() > self.recycle_bytes:
                self.num_recycled += 1
                worker.stop()
            return answer
        except CompileBudgetError:
            self.num_killed += 1
            raise
        finally:
            self._idle.put(worker if worker is not None and worker.is_alive else None)

    def start_all(self) -> None:
        """Start every worker that is not running yet (the server does it at start-up, so the
        first grammar request does not wait for a worker to start). A worker that fails to
        start here (the process is shutting down) is logged and left to start on first use."""
        for _ in range(self.num_workers):
            worker = self._idle.get()
            try:
                if worker is None:
                    worker = _Worker.start(self._context, self.vocab)
            except GrammarWorkerError as exc:
                logger.warning("grammar worker not started ahead of use: %s", exc)
                return
            finally:
                self._idle.put(worker)

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the started workers (a test's view of recycling)."""
        found: list[_Worker | None] = []
        while True:
            try:
                found.append(self._idle.get_nowait())
            except queue.Empty:
                break
        for worker in found:
            self._idle.put(worker)
        return [w.process.pid for w in found if w is not None and w.process.pid is not None]

    def shutdown(self) -> None:
        """End every idle worker (a running job's worker ends when its job does)."""
        while True:
            try:
                worker = self._idle.get_nowait()
            except queue.Empty:
                return
            if worker is not None:
                worker.stop()


class _Worker:
    """One worker process and the parent's end of its pipe."""

    def __init__(self, process: BaseProcess, conn: Connection, idle_bytes: int) -> None:
        self.process = process
        self.conn = conn
        self.idle_bytes = idle_bytes

    @classmethod
    def start(cls, context: Any, vocab: Vocabulary) -> _Worker:
        parent_conn, child_conn = context.Pipe()
        process = context.Process(
            target=_worker_main, args=(child_conn, vocab), name="formcast-grammar-worker"
        )
        process.daemon = True
        process.start()
        child_conn.close()
        if not parent_conn.poll(_START_TIMEOUT_S):
            process.kill()
            raise GrammarWorkerError(
                f"a grammar worker did not start within {_START_TIMEOUT_S:g} s"
            )
        try:
            parent_conn.recv()  # "ready"
        except EOFError:
            raise GrammarWorkerError(
                f"a grammar worker exited while starting (exit code {process.exitcode})"
            ) from None
        return cls(process, parent_conn, _resident_bytes(process.pid))

    @property
    def is_alive(self) -> bool:
        return self.process.is_alive()

    def grown_bytes(self) -> int:
        return _resident_bytes(self.process.pid) - self.idle_bytes

    def run(self, recipe: GrammarRecipe, limits: GrammarLimits) -> float:
        self.conn.send((recipe, str(default_cache_dir().parent)))
        started = time.monotonic()
        while not self.conn.poll(POLL_S):
            elapsed = time.monotonic() - started
            if elapsed > limits.compile_timeout_s:
                self.kill()
                raise CompileBudgetError(
                    f"compile budget exceeded: compiling took more than "
                    f"compile_timeout_s={limits.compile_timeout_s:g} s"
                )
            grown = self.grown_bytes()
            if grown > limits.compile_memory_bytes:
                self.kill()
                raise CompileBudgetError(
                    f"compile budget exceeded: compiling needed more than "
                    f"compile_memory_bytes={limits.compile_memory_bytes:,} bytes of memory"
                )
            if not self.process.is_alive():
                break
        try:
            status, value = self.conn.recv()
        except (EOFError, OSError):
            self.kill()
            code = self.process.exitcode
            if code == -9:  # killed by someone else: the kernel's out-of-memory killer
                raise CompileBudgetError(
                    "compile budget exceeded: the grammar worker ran out of memory"
                ) from None
            raise GrammarWorkerError(
                f"the grammar worker exited while compiling (exit code {code})"
            ) from None
        if status == "ok":
            return value
        raise _rebuild_error(value)

    def kill(self) -> None:
        self.process.kill()
        self.process.join(5.0)
        self.conn.close()

    def stop(self) -> None:
        with contextlib.suppress(OSError, EOFError):
            self.conn.send(None)
        self.process.join(5.0)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5.0)
        self.conn.close()


def _resident_bytes(pid: int | None) -> int:
    """Resident set size of process ``pid`` (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/statm") as handle:
            return int(handle.read().split()[1]) * _PAGE_BYTES
    except (OSError, IndexError, ValueError):
        return 0


def _error_state(exc: BaseException) -> tuple[str, str, str, dict[str, Any]]:
    """What the parent needs to raise ``exc`` again: module, class name, message, attributes."""
    attributes = {
        name: value
        for name, value in vars(exc).items()
        if isinstance(value, (str, int, float, bool, type(None)))
    }
    return type(exc).__module__, type(exc).__qualname__, str(exc), attributes


def _rebuild_error(state: tuple[str, str, str, dict[str, Any]]) -> BaseException:
    """The exception a worker reported: formcast's own classes only, else a worker error."""
    module_name, class_name, message, attributes = state
    cls: Any = None
    if module_name.startswith("formcast."):
        cls = getattr(importlib.import_module(module_name), class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, FormcastError)):
        return GrammarWorkerError(f"the grammar worker failed: {class_name}: {message}")
    exc = cls.__new__(cls)
    Exception.__init__(exc, message)
    exc.__dict__.update(attributes)
    return exc


def _worker_main(conn: Connection, vocab: Vocabulary) -> None:  # pragma: no cover - child
    """A worker's loop: compile each recipe received until ``None`` or the pipe closes."""
    from formcast.grammar.index.compile import warm_kernels

    warm_kernels(vocab)
    conn.send("ready")
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        if job is None:
            return
        recipe, cache_root = job
        os.environ["FORMCAST_CACHE"] = cache_root
        started = time.perf_counter()
        try:
            recipe.spec().compile_fn(vocab)
        except Exception as exc:  # noqa: BLE001 - every failure is reported to the parent
            conn.send(("error", _error_state(exc)))
            continue
        conn.send(("ok", time.perf_counter() - started))
