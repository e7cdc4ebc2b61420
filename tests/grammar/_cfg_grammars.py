"""Grammar texts shared by the CFG tests and benchmarks/bench_cfg.py, read from the one corpus
in ``benchmarks/data/grammars/`` (the two GBNF files are llama.cpp's, verbatim)."""

from pathlib import Path

GRAMMARS_DIR = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "grammars"


def _read(name: str) -> str:
    return (GRAMMARS_DIR / name).read_text()


JSON_LARK = _read("json.lark")
ARITHMETIC_LARK = _read("arithmetic.lark")
SQL_LARK = _read("sql.lark")
PYEXPR_LARK = _read("pyexpr.lark")
TOOL_CALL_LARK = _read("tool_call.lark")
AMBIGUOUS_LARK = _read("ambiguous.lark")

LARK_GRAMMARS = {
    "json": JSON_LARK,
    "arithmetic": ARITHMETIC_LARK,
    "sql": SQL_LARK,
    "pyexpr": PYEXPR_LARK,
    "tool_call": TOOL_CALL_LARK,
    "ambiguous": AMBIGUOUS_LARK,
}

JSON_GBNF = _read("json.gbnf")
ARITHMETIC_GBNF = _read("arithmetic.gbnf")
