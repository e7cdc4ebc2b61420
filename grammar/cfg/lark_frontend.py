"""compile_lark: grammars in Lark's syntax -> CfgGrammar -> CompiledCFG.

The ``lark`` library parses the grammar text (rules, terminals, ``?rule``, ``*`` ``+`` ``?``
``[...]``, ``~n`` / ``~n..m``, templates, ``%import common.*``, ``%ignore``); we take its
compiled BNF rules and terminal regexes. The language we enforce is the grammar's
context-free language where each terminal stands for the strings its regex *fullmatches* and
``%ignore`` terminals may occur between terminals and at both ends. That is what Lark's Earley
parser with ``lexer="dynamic_complete"`` accepts, for terminals whose leftmost-greedy match is
their longest (true of ordinary terminals; a terminal like ``/a|ab/`` differs, since Lark's
regex match stops at ``a``). Lark's ``common.ESCAPED_STRING`` uses a lookbehind, which our
automata do not support; it is replaced by the equivalent lookaround-free regex (the string
ends at the first unescaped quote, as with Lark's non-greedy match).
"""

from __future__ import annotations

import os
import warnings
from typing import Any

from formcast.errors import GrammarError
from formcast.grammar.cfg.compiled import DEFAULT_TUNING, CfgTuning, CompiledCFG, compile_cfg
from formcast.grammar.cfg.rules import CfgGrammar
from formcast.grammar.index.vocabulary import Vocabulary

# Lark regexes with lookarounds -> equivalent regexes for our automata
_KNOWN_REGEXES = {
    r'".*?(?<!\\)(\\\\)*?"': r'"(?:[^"\\\n]|\\[^\n])*"',
    r".*?(?<!\\)(\\\\)*?": r"(?:[^\\\n]|\\[^\n])*",
}


def _lark():
    try:
        import lark
    except ImportError as exc:  # pragma: no cover - lark is a dependency
        raise GrammarError("compile_lark needs the 'lark' package") from exc
    return lark


def _lark_error(exc: Exception, text: str) -> GrammarError:
    position = getattr(exc, "pos_in_stream", None)
    line, column = getattr(exc, "line", None), getattr(exc, "column", None)
    where = f" (line {line}, column {column})" if line not in (None, -1) else ""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return GrammarError(f"invalid Lark grammar{where}: {first}", position=position)


def _library_grammars_only(base_path: Any, grammar_path: str) -> tuple[Any, str]:
    """Lark's import hook: ``%import`` may load lark's own library grammars (``common``,
    ``unicode``, ...) and nothing else. Lark would otherwise look for other names as files
    relative to the working directory, and fail with a bare ``FileNotFoundError`` (or an
    ``AssertionError`` where such a file exists).

    Raises
    ------
    GrammarError
        For any other import, naming it.
    """
    from lark.load_grammar import PackageResource, stdlib_loader

    in_library = isinstance(base_path, PackageResource) and base_path.pkg_name == "lark"
    if base_path is None or in_library:
        try:
            return stdlib_loader(base_path, grammar_path)
        except OSError:
            pass
    name = os.path.splitext(grammar_path)[0].replace(os.sep, ".")
    prefix = "" if base_path is None else "."
    raise GrammarError(
        f"%import {prefix}{name}: only lark's library grammars (common, unicode, ...) can be "
        "imported"
    )


def lark_to_cfg(text: str, start: str = "start", *, lenient: bool = False) -> CfgGrammar:
    """Parse Lark grammar ``text`` with the ``lark`` library into a :class:`CfgGrammar`.

    Raises
    ------
    GrammarError
        Malformed text (with line, column and position), undefined rules or terminals, a
        missing start rule, or unreachable rules (a warning with ``lenient=True``).
    """
    lark = _lark()
    from lark.load_grammar import load_grammar

    # one pass of lark's grammar loader (no parser construction: the parser is ours)
    try:
        loaded, _ = load_grammar(text, "<grammar>", [_library_grammars_only], False)
        if start not in {str(name) for name, *_ in loaded.rule_defs}:
            raise GrammarError(f"start rule {start!r} is not defined")
        terminals, lark_rules, ignore_tokens = loaded.compile([start], set())
    except lark.exceptions.LarkError as exc:
        raise _lark_error(exc, text) from exc
    _report_unreachable(loaded, start, lenient)
    index = {t.name: k for k, t in enumerate(terminals)}
    regexes = []
    for t in terminals:
        rx = t.pattern.to_regexp()
        regexes.append(_KNOWN_REGEXES.get(rx, rx))
    nonterminals: dict[str, int] = {}

    def nt(name: str) -> int:  # (lark hands some names as Token, a str subclass)
        return nonterminals.setdefault(str(name), len(nonterminals))

    nt(start)
    rules = []
    for rule in lark_rules:
        rhs = tuple(index[s.name] if s.is_term else ~nt(s.name) for s in rule.expansion)
        rules.append((nt(rule.origin.name), rhs))
    missing = [name for name in ignore_tokens if name not in index]
    if missing:
        raise GrammarError(f"%ignore names undefined terminals: {', '.join(missing)}")
    return CfgGrammar(
        terminal_names=[str(t.name) for t in terminals],
        terminal_regexes=regexes,
        nonterminal_names=list(nonterminals),
        rules=rules,
        start=nonterminals[start],
        ignore=[index[name] for name in ignore_tokens],
    )


def _report_unreachable(grammar, start: str, lenient: bool) -> None:
    """Lark silently drops rules the start rule never reaches; we report them."""
    from lark.grammar import NonTerminal
    from lark.lexer import Token

    edges: dict[str, set[str]] = {}
    for name, _params, tree, _options in grammar.rule_defs:
        refs = tree.scan_values(
            lambda v: isinstance(v, NonTerminal) or (isinstance(v, Token) and v.type == "RULE")
        )
        edges[str(name)] = {v.name if isinstance(v, NonTerminal) else str(v) for v in refs}
    seen = {start}
    stack = [start]
    while stack:
        for ref in edges.get(stack.pop(), ()):
            if ref not in seen:
                seen.add(ref)
                stack.append(ref)
    unreachable = sorted(n for n in edges if n not in seen and "__" not in n)
    if unreachable:
        message = f"rules unreachable from {start!r}: {', '.join(unreachable)}"
        if not lenient:
            raise GrammarError(message)
        warnings.warn(f"formcast: {message}", stacklevel=3)


def compile_lark(
    text: str,
    vocab: Vocabulary,
    start: str = "start",
    *,
    lenient: bool = False,
    cache: bool = True,
    max_depth: int | None = None,
    tuning: CfgTuning = DEFAULT_TUNING,
) -> CompiledCFG:
    """Compile a grammar in Lark syntax to a :class:`CompiledCFG` with exact token masks.

    Parameters
    ----------
    text:
        The grammar (Lark syntax; see the module docstring for the language enforced).
    vocab:
        The model's :class:`Vocabulary`.
    start:
        The start rule.
    lenient:
        Unreachable rules only warn instead of raising.
    cache:
        Reuse a grammar compiled before with the same text, options and vocabulary (kept in
        memory and on disk, see :mod:`formcast.grammar.cfg.compiled`).
    max_depth:
        Bound on the nesting depth of the output (``None``: unbounded). A matcher raises
        ``GrammarError`` naming the depth and the output byte offset when a token would nest
        deeper; see :class:`~formcast.grammar.cfg.earley.EarleyNode` for how depth counts.
    tuning:
        Which exact paths the runtime and lexer take (:class:`~formcast.grammar.cfg.compiled.CfgTuning`;
        the defaults are formcast's, other settings exist to compare the paths in tests).

    Raises
    ------
    GrammarError
        Malformed grammar (line/column/position), undefined or unreachable rules, rules that
        can never finish, terminals whose regex is unsupported or empty.
    """
    return compile_cfg(
        "lark",
        text,
        {"start": start},
        vocab,
        lambda: lark_to_cfg(text, start, lenient=lenient),
        lenient=lenient,
        max_depth=max_depth,
        cache=cache,
        tuning=tuning,
    )
