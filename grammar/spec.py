"""GrammarSpec: the one grammar request, compiled by the engine against its vocabulary.

The facade, the HTTP server and the engine all describe grammars with it, so one schema
compiles once per process whichever door it came in by. A request's ``grammar=`` is either a
ready :class:`~formcast.grammar.protocol.Grammar` or a spec: a hashable ``key`` (requests with
equal keys share one compiled grammar) and ``compile_fn(vocab) -> Grammar``, run in the engine's grammar thread pool so the request waits for it
without blocking the others. The constructors cover the grammar kinds formcast compiles; a
``dict`` with one of their names as its only key is accepted as shorthand
(``{"json_schema": {...}}``, ``{"regex": "..."}``, ``{"choice": [...]}``, ``{"lark": "..."}``,
``{"structural_tag": {"type": "structural_tag", "format": {...}}}``).

Specs made by the constructors also carry their `GrammarRecipe`: the kind, the input and the
options as plain data. It lets the engine check the input's size (`GrammarLimits`) before
compiling and rebuild the spec in a grammar worker process. Compiling never ends in a bare
``RecursionError``: a grammar nested deeper than Python's stack is a `CompileBudgetError`.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from formcast.errors import CompileBudgetError, RequestError
from formcast.grammar.cfg.lark_frontend import compile_lark
from formcast.grammar.index.compile import compile_choice, compile_regex
from formcast.grammar.index.vocabulary import Vocabulary
from formcast.grammar.json_schema.compile import compile_json_schema
from formcast.grammar.json_schema.sources import schema_of
from formcast.grammar.limits import GrammarLimits, check_grammar_size
from formcast.grammar.protocol import Grammar
from formcast.grammar.reasoning.config import ReasoningConfig
from formcast.grammar.reasoning.grammar import ReasoningGrammar
from formcast.grammar.structural_tag.compile import compile_structural_tag
from formcast.grammar.structural_tag.format import parse_structural_tag

CompileFn = Callable[[Vocabulary], Grammar]
# any text (valid UTF-8): the answer of free text after reasoning
ANY_TEXT = r"[\s\S]*"


@dataclass(frozen=True)
class GrammarRecipe:
    """A constructor call of `GrammarSpec` as plain (picklable) data.

    Parameters
    ----------
    kind : str
        ``"json_schema"``, ``"regex"``, ``"choice"``, ``"lark"``, ``"structural_tag"`` or
        ``"reasoning"`` (the constructor's name).
    source : Any
        The schema (a dict / bool), the pattern, the options list, the grammar text, the
        structural tag request, or for ``"reasoning"`` ``{"answer": GrammarRecipe,
        "reasoning": ReasoningConfig}``.
    options : dict
        Keyword options of the compile function.
    """

    kind: str
    source: Any
    options: dict[str, Any] = field(default_factory=dict)

    def spec(self) -> GrammarSpec:
        """The spec this recipe describes."""
        return getattr(GrammarSpec, self.kind)(self.source, **self.options)

    def check_size(self, limits: GrammarLimits) -> None:
        """Raise `GrammarLimitError` if the input is over one of ``limits``."""
        check_grammar_size(self.kind, self.source, limits)


# a compile past Python's recursion limit is run again on a thread with this stack and limit
# (grammar trees nest as deep as their input: an object's optional properties chain)
_DEEP_STACK_BYTES = 1 << 30  # virtual; pages are committed only as deep as the run goes
_DEEP_RECURSION_LIMIT = 150_000
_DEEP_LOCK = threading.Lock()


def _guarded(compile_fn: Callable[[], Grammar]) -> Grammar:
    """``compile_fn()``; past the recursion limit, once more on a deep stack (one at a time).

    Raises `CompileBudgetError` if even the deep run recurses too far.
    """
    try:
        return compile_fn()
    except RecursionError:
        pass
    with _DEEP_LOCK:
        return _run_deep(compile_fn)


def _run_deep(compile_fn: Callable[[], Grammar]) -> Grammar:
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(("ok", compile_fn()))
        except BaseException as exc:  # noqa: BLE001 - handed back to the calling thread
            outcome.append(("error", exc))

    old_stack = threading.stack_size(_DEEP_STACK_BYTES)
    old_limit = sys.getrecursionlimit()
    try:
        thread = threading.Thread(target=run, name="formcast-deep-compile")
        sys.setrecursionlimit(_DEEP_RECURSION_LIMIT)  # process-wide while the thread runs
        thread.start()
        thread.join()
    finally:
        sys.setrecursionlimit(old_limit)
        threading.stack_size(old_stack)
    status, value = outcome[0]
    if status == "ok":
        return value
    if isinstance(value, RecursionError):
        raise CompileBudgetError(
            "the grammar is nested too deeply to compile (past a recursion depth of "
            f"{_DEEP_RECURSION_LIMIT:,}); flatten it or split it into smaller parts"
        ) from None
    raise value


@dataclass(frozen=True)
class GrammarSpec:
    """A not-yet-compiled grammar.

    Parameters
    ----------
    key : Hashable
        Identity of the grammar: specs with equal keys share one compilation.
    compile_fn : Callable[[Vocabulary], Grammar]
        Compiles the grammar over the engine's vocabulary (runs in a worker thread).
    description : str
        Short human-readable name used in error messages.
    """

    key: Hashable
    compile_fn: CompileFn = field(compare=False)
    description: str = field(default="", compare=False)
    recipe: GrammarRecipe | None = field(default=None, compare=False)

    @classmethod
    def regex(cls, pattern: str, **options: Any) -> GrammarSpec:
        """Output must fullmatch ``pattern`` (options go to ``compile_regex``)."""
        return cls(
            ("regex", pattern, _options_key(options)),
            lambda vocab: _guarded(lambda: compile_regex(pattern, vocab, **options)),
            f"regex {_short(pattern)}",
            GrammarRecipe("regex", pattern, options),
        )

    @classmethod
    def json_schema(cls, schema: Any, **options: Any) -> GrammarSpec:
        """Output is JSON valid against ``schema`` (options go to ``compile_json_schema``)."""
        schema = schema_of(schema)
        text = json.dumps(schema, ensure_ascii=False)  # key order kept: it fixes property order
        return cls(
            ("json_schema", text, _options_key(options)),
            lambda vocab: _guarded(lambda: compile_json_schema(schema, vocab, **options)),
            f"JSON schema {_short(text)}",
            GrammarRecipe("json_schema", schema, options),
        )

    @classmethod
    def choice(cls, choices: Sequence[str], **options: Any) -> GrammarSpec:
        """Output is exactly one of ``choices``."""
        options_list = list(choices)
        return cls(
            ("choice", tuple(options_list), _options_key(options)),
            lambda vocab: _guarded(lambda: compile_choice(options_list, vocab, **options)),
            f"choice {_short(repr(options_list))}",
            GrammarRecipe("choice", options_list, options),
        )

    @classmethod
    def lark(cls, grammar_text: str, **options: Any) -> GrammarSpec:
        """Output is parsed by the Lark grammar ``grammar_text`` (options go to ``compile_lark``)."""
        return cls(
            ("lark", grammar_text, _options_key(options)),
            lambda vocab: _guarded(lambda: compile_lark(grammar_text, vocab, **options)),
            f"Lark grammar {_short(grammar_text)}",
            GrammarRecipe("lark", grammar_text, options),
        )

    @classmethod
    def structural_tag(cls, tag: Any, **options: Any) -> GrammarSpec:
        """Output follows the structural tag ``tag`` (XGrammar / vLLM request shape; options
        go to ``compile_structural_tag``).

        Raises
        ------
        StructuralTagError
            At once, for a malformed or unsupported tag (names the node's JSON pointer).
        """
        parsed = parse_structural_tag(tag)
        text = parsed.to_json()
        return cls(
            ("structural_tag", text, _options_key(options)),
            lambda vocab: _guarded(lambda: compile_structural_tag(parsed, vocab, **options)),
            f"structural tag {_short(text)}",
            GrammarRecipe("structural_tag", tag, options),
        )

    @classmethod
    def coerce(cls, grammar: object) -> Grammar | GrammarSpec:
        """Accept a compiled :class:`Grammar`, a `GrammarSpec` or a one-key dict shorthand.

        Raises
        ------
        RequestError
            For anything else (names the type or the unknown key).
        """
        if isinstance(grammar, (GrammarSpec, Grammar)):
            return grammar
        if isinstance(grammar, dict) and len(grammar) == 1:
            ((kind, value),) = grammar.items()
            makers = {
                "json_schema": cls.json_schema,
                "regex": cls.regex,
                "choice": cls.choice,
                "lark": cls.lark,
                "structural_tag": cls.structural_tag,
            }
            if kind in makers:
                return makers[kind](value)
            raise RequestError(f"unknown grammar kind {kind!r}; expected one of {sorted(makers)}")
        raise RequestError(
            "grammar must be a compiled grammar, a GrammarSpec or a dict like "
            f"{{'json_schema': ...}}, got {type(grammar).__name__}"
        )

    @classmethod
    def reasoning(
        cls, answer: GrammarSpec | dict[str, Any] | None, config: ReasoningConfig | None = None
    ) -> GrammarSpec:
        """Free reasoning between ``config``'s tags, then ``answer`` (a `ReasoningGrammar`).

        ``answer`` is a spec, None (any text: free text after the thoughts), or (as a
        `GrammarRecipe` rebuilds it) ``{"answer": recipe, "reasoning": config}`` with
        ``config`` omitted.
        """
        if isinstance(answer, dict):
            answer, config = answer["answer"].spec(), answer["reasoning"]
        if config is None:
            raise RequestError("GrammarSpec.reasoning needs a ReasoningConfig")
        if answer is None:
            answer = cls.regex(ANY_TEXT)
        recipe = (
            None
            if answer.recipe is None
            else GrammarRecipe("reasoning", {"answer": answer.recipe, "reasoning": config})
        )
        answer_compile = answer.compile_fn
        return cls(
            ("reasoning", answer.key, json.dumps(config.to_json(), sort_keys=True)),
            lambda vocab: ReasoningGrammar(answer_compile(vocab), config),
            f"reasoning ({config.start!r}...{config.end!r}) then {answer.description}",
            recipe,
        )

    def __str__(self) -> str:
        return self.description or repr(self.key)


# what a request may pass as ``grammar=``: compiled, a spec, or a one-key dict shorthand
GrammarLike = Grammar | GrammarSpec | dict[str, object]


def _options_key(options: dict[str, Any]) -> str:
    return json.dumps(options, sort_keys=True, default=repr)


def _short(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")
