"""Grammar texts shared by the CFG tests and benchmarks/bench_cfg.py."""

JSON_LARK = r"""
?start: value
?value: object | array | string | SIGNED_NUMBER -> number
      | "true" -> true | "false" -> false | "null" -> null
array  : "[" [value ("," value)*] "]"
object : "{" [pair ("," pair)*] "}"
pair   : string ":" value
string : ESCAPED_STRING
%import common.ESCAPED_STRING
%import common.SIGNED_NUMBER
%import common.WS
%ignore WS
"""

ARITHMETIC_LARK = r"""
?start: sum
?sum: product | sum "+" product | sum "-" product
?product: atom | product "*" atom | product "/" atom
?atom: NUMBER | "-" atom | "(" sum ")" | NAME
%import common.NUMBER
%import common.CNAME -> NAME
%import common.WS_INLINE
%ignore WS_INLINE
"""

SQL_LARK = r"""
start: "SELECT"i select_list "FROM"i NAME [where] [order] [limit] [";"]
select_list: "*" | column ("," column)*
column: NAME ["." NAME] ["AS"i NAME]
where: "WHERE"i cond
?cond: cond "AND"i cond | cond "OR"i cond | "NOT"i cond | "(" cond ")" | expr OP expr
?expr: NAME ["." NAME] | NUMBER | STRING
order: "ORDER"i "BY"i NAME ["ASC"i | "DESC"i]
limit: "LIMIT"i INT
OP: "=" | "<" | ">" | "<=" | ">=" | "!="
STRING: /'[^'\n]*'/
%import common.CNAME -> NAME
%import common.INT
%import common.NUMBER
%import common.WS
%ignore WS
"""

PYEXPR_LARK = r"""
?start: expr
?expr: lambda_ | or_test
lambda_: "lambda" [NAME ("," NAME)*] ":" expr
?or_test: and_test ("or" and_test)*
?and_test: not_test ("and" not_test)*
?not_test: "not" not_test | comparison
?comparison: arith (COMP_OP arith)*
?arith: term (("+"|"-") term)*
?term: factor (("*"|"/"|"//"|"%") factor)*
?factor: ("-"|"+") factor | power
?power: atom_expr ("**" factor)?
?atom_expr: atom_expr "(" [arguments] ")" | atom_expr "[" expr "]" | atom_expr "." NAME | atom
arguments: expr ("," expr)*
?atom: NAME | NUMBER | STRING | "(" expr ")" | "[" [expr ("," expr)*] "]"
     | "True" | "False" | "None"
COMP_OP: "<" | ">" | "==" | ">=" | "<=" | "!="
STRING: /'[^'\\\n]*'/
%import common.CNAME -> NAME
%import common.INT -> NUMBER
%ignore " "
"""

TOOL_CALL_LARK = r"""
start: TEXT? (call TEXT?)*
call: "<tool_call>" obj "</tool_call>"
obj: "{" [pair ("," pair)*] "}"
pair: ESCAPED_STRING ":" value
?value: obj | "[" [value ("," value)*] "]" | ESCAPED_STRING | SIGNED_NUMBER | "true" | "false" | "null"
TEXT: /[^<]+/
%import common.ESCAPED_STRING
%import common.SIGNED_NUMBER
"""

AMBIGUOUS_LARK = r"""
start: e
e: e "+" e | e "*" e | x
x: NAME | NAME NAME | "a"~2..3
NAME: /[a-c]+/
"""

LARK_GRAMMARS = {
    "json": JSON_LARK,
    "arithmetic": ARITHMETIC_LARK,
    "sql": SQL_LARK,
    "pyexpr": PYEXPR_LARK,
    "tool_call": TOOL_CALL_LARK,
    "ambiguous": AMBIGUOUS_LARK,
}

# llama.cpp grammars/json.gbnf (verbatim)
JSON_GBNF = r"""
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= | " " | "\n" [ \t]{0,20}
"""

# llama.cpp grammars/arithmetic.gbnf (verbatim)
ARITHMETIC_GBNF = r"""
root  ::= (expr "=" ws term "\n")+
expr  ::= term ([-+*/] term)*
term  ::= ident | num | "(" ws expr ")" ws
ident ::= [a-z] [a-z0-9_]* ws
num   ::= [0-9]+ ws
ws    ::= [ \t\n]*
"""
