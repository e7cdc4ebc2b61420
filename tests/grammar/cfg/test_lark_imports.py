"""``%import`` in a Lark grammar loads lark's library grammars and nothing else.

Found by fuzzing (tests/fuzz): ``%import ommon.ESCAPED_STRING`` (a mutated ``common``) raised
a bare ``FileNotFoundError`` from lark's loader, which after missing the name in its library
tries ``ommon.lark`` relative to the working directory. And a relative ``%import .x.X`` read
``x.lark`` from the working directory: a grammar sent to the server could load files next to
it. Both are now a `GrammarError` naming the import.
"""

from __future__ import annotations

import pytest

from formcast.errors import GrammarError
from formcast.grammar.cfg.lark_frontend import lark_to_cfg


def test_unknown_library_import_is_a_grammar_error():
    with pytest.raises(GrammarError, match="%import ommon"):
        lark_to_cfg("start: ESCAPED_STRING\n%import ommon.ESCAPED_STRING\n")


def test_files_next_to_the_process_are_never_imported(tmp_path, monkeypatch):
    (tmp_path / "secret.lark").write_text('TOKEN: "hunter2"\n')
    monkeypatch.chdir(tmp_path)
    for text in ("start: TOKEN\n%import .secret.TOKEN\n", "start: TOKEN\n%import secret.TOKEN\n"):
        with pytest.raises(GrammarError, match="only lark's library grammars"):
            lark_to_cfg(text)


def test_library_imports_still_work():
    grammar = lark_to_cfg(
        "start: NUMBER (WS NAME)*\n%import common.NUMBER\n%import common.WS\n%import python.NAME\n"
    )
    assert {"NUMBER", "WS", "NAME"} <= set(grammar.terminal_names)
