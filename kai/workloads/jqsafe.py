"""Static safety checks for the jq programs in a workload definition.

Definitions come from the cluster (anyone allowed to create a `Karta` writes code
that kai then runs inside the scheduler), so every program must be read-only and
must finish: no assignment or update operators, no recursion, no unbounded
generators, no reads of the environment or the clock (workload-definitions §4.5).
A regular expression over the text cannot tell `del(.a)` from `."del"` or from a
string "del(.a)", so the program is tokenised first, with string interpolation
`\\(...)` lexed as code, and the checks run on tokens.

Write paths (suspend actions) must additionally be plain path expressions
(`.spec.suspend`, `.a[].b`); `simple_path` recognises them and returns their
components, which the expansion code also uses to invert label selectors.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

TokenKind = Literal["field", "ident", "var", "string", "number", "op", "format", "recurse", "dot"]

_ASSIGNMENT_OPERATORS = frozenset({"=", "|=", "+=", "-=", "*=", "/=", "%=", "//="})
_OPERATORS = sorted(
    [
        "?//",
        "//=",
        "|=",
        "+=",
        "-=",
        "*=",
        "/=",
        "%=",
        "==",
        "!=",
        "<=",
        ">=",
        "//",
        "=",
        "|",
        ",",
        "+",
        "-",
        "*",
        "/",
        "%",
        "<",
        ">",
        "?",
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        ":",
        ";",
    ],
    key=len,
    reverse=True,
)
_FORBIDDEN_FUNCTIONS: dict[str, str] = {
    "del": "deletes from the document",
    "delpaths": "deletes from the document",
    "setpath": "writes to the document",
    "paths": "walks the whole document",
    "leaf_paths": "walks the whole document",
    "recurse": "recurses without bound",
    "recurse_down": "recurses without bound",
    "walk": "rewrites the whole document",
    "repeat": "loops without bound",
    "range": "generates without bound",
    "while": "loops without bound",
    "until": "loops without bound",
    "combinations": "generates exponentially many results",
    "tostream": "walks the whole document",
    "def": "defines (possibly recursive) functions",
    "env": "reads the process environment",
    "input": "reads further inputs",
    "inputs": "reads further inputs",
    "input_filename": "reads the process state",
    "input_line_number": "reads the process state",
    "debug": "writes to stderr",
    "stderr": "writes to stderr",
    "halt": "stops the process",
    "halt_error": "stops the process",
    "now": "reads the clock",
    "localtime": "reads the time zone",
    "strflocaltime": "reads the time zone",
    "import": "loads modules",
    "include": "loads modules",
    "get_search_list": "reads the process state",
    "get_prog_origin": "reads the process state",
    "get_jq_origin": "reads the process state",
}
_FORBIDDEN_VARIABLES = {"$ENV": "reads the process environment"}


class JqSyntaxError(ValueError):
    """A program the tokenizer cannot read (an unterminated string, a stray character)."""


@dataclass(frozen=True, slots=True)
class Token:
    kind: TokenKind
    text: str
    position: int


def tokenize(program: str) -> list[Token]:
    """The tokens of a jq program, with the code inside string interpolations inlined."""
    tokens, end = _lex(program, 0, nested=False)
    if end != len(program):
        raise JqSyntaxError(f"unexpected ')' at column {end + 1}")
    return tokens


def read_only_problems(program: str) -> list[str]:
    """Why `program` is not an acceptable read-only, terminating jq program; empty when it is."""
    try:
        tokens = tokenize(program)
    except JqSyntaxError as error:
        return [str(error)]
    problems: list[str] = []
    for index, token in enumerate(tokens):
        if token.kind == "op" and token.text in _ASSIGNMENT_OPERATORS:
            problems.append(f"assignment operator '{token.text}' writes to the document")
        elif token.kind == "recurse":
            problems.append("recursive descent '..' walks the whole document")
        elif token.kind == "var" and token.text in _FORBIDDEN_VARIABLES:
            problems.append(f"'{token.text}' {_FORBIDDEN_VARIABLES[token.text]}")
        elif (
            token.kind == "ident"
            and token.text in _FORBIDDEN_FUNCTIONS
            and not _is_object_key(tokens, index)
        ):
            problems.append(f"'{token.text}' {_FORBIDDEN_FUNCTIONS[token.text]}")
    return problems


PathStep = str | int | None
"""One step of a plain path: a key, an index, or None for `[]` (every element)."""


def simple_path(program: str) -> tuple[PathStep, ...] | None:
    """The steps of a plain path expression (`.a.b`, `.a["k"]`, `.a[0]`, `.a[]`), else None."""
    try:
        tokens = tokenize(program.strip())
    except JqSyntaxError:
        return None
    steps: list[PathStep] = []
    position = 0
    if not tokens or tokens[0].kind not in ("field", "dot"):
        return None
    while position < len(tokens):
        token = tokens[position]
        if token.kind == "field":
            steps.append(token.text[1:])
            position += 1
        elif token.kind == "dot" and _kinds(tokens, position + 1, 1) == ("string",):
            steps.append(_string_value(tokens[position + 1].text))
            position += 2
        elif token.kind == "dot":
            position += 1
        elif token.text == "[" and _texts(tokens, position + 1, 1) == ("]",):
            steps.append(None)
            position += 2
        elif token.text == "[" and _texts(tokens, position + 2, 1) == ("]",):
            inner = tokens[position + 1]
            if inner.kind == "string":
                steps.append(_string_value(inner.text))
            elif inner.kind == "number" and inner.text.isdigit():
                steps.append(int(inner.text))
            else:
                return None
            position += 3
        elif token.text == "?":
            position += 1
        else:
            return None
    return tuple(steps)


def _kinds(tokens: list[Token], start: int, count: int) -> tuple[str, ...]:
    return tuple(token.kind for token in tokens[start : start + count])


def _texts(tokens: list[Token], start: int, count: int) -> tuple[str, ...]:
    return tuple(token.text for token in tokens[start : start + count])


def _string_value(literal: str) -> str:
    """The value of a string literal without interpolation (escapes as JSON reads them)."""
    return str(json.loads(literal))


def _is_object_key(tokens: list[Token], index: int) -> bool:
    """True for `{del: 1}` or `{del}`: an identifier used as an object key, not a call."""
    depth_stack: list[str] = []
    for token in tokens[:index]:
        if token.kind == "op" and token.text in "([{":
            depth_stack.append(token.text)
        elif token.kind == "op" and token.text in ")]}" and depth_stack:
            depth_stack.pop()
    if not depth_stack or depth_stack[-1] != "{":
        return False
    before = tokens[index - 1].text if index > 0 else ""
    after = tokens[index + 1].text if index + 1 < len(tokens) else ""
    return before in ("{", ",") and after in (":", ",", "}")


def _lex(text: str, position: int, *, nested: bool) -> tuple[list[Token], int]:
    """Lex from `position`; when `nested`, stop at the `)` closing an interpolation."""
    tokens: list[Token] = []
    depth = 0
    while position < len(text):
        char = text[position]
        if char.isspace():
            position += 1
        elif char == "#":
            newline = text.find("\n", position)
            position = len(text) if newline == -1 else newline + 1
        elif char == '"':
            string_tokens, position = _lex_string(text, position)
            tokens.extend(string_tokens)
        elif char == "." and text.startswith("..", position):
            tokens.append(Token("recurse", "..", position))
            position += 2
        elif char == "." and position + 1 < len(text) and _is_ident_start(text[position + 1]):
            end = _ident_end(text, position + 1)
            tokens.append(Token("field", text[position:end], position))
            position = end
        elif char.isdigit() or (char == "." and text[position + 1 : position + 2].isdigit()):
            end = _number_end(text, position)
            tokens.append(Token("number", text[position:end], position))
            position = end
        elif char == ".":
            tokens.append(Token("dot", ".", position))
            position += 1
        elif char in "$@" and position + 1 < len(text) and _is_ident_start(text[position + 1]):
            end = _ident_end(text, position + 1)
            tokens.append(Token("var" if char == "$" else "format", text[position:end], position))
            position = end
        elif _is_ident_start(char):
            end = _ident_end(text, position)
            tokens.append(Token("ident", text[position:end], position))
            position = end
        else:
            operator = next((op for op in _OPERATORS if text.startswith(op, position)), None)
            if operator is None:
                raise JqSyntaxError(f"unexpected character {char!r} at column {position + 1}")
            if nested and operator == ")" and depth == 0:
                return tokens, position
            depth += operator == "("
            depth -= operator == ")"
            tokens.append(Token("op", operator, position))
            position += len(operator)
    if nested:
        raise JqSyntaxError("unterminated string interpolation")
    return tokens, position


def _lex_string(text: str, start: int) -> tuple[list[Token], int]:
    """A string literal; the code of each `\\(...)` interpolation comes out as tokens too."""
    tokens: list[Token] = []
    has_interpolation = False
    position = start + 1
    while position < len(text):
        char = text[position]
        if char == "\\" and text.startswith("\\(", position):
            has_interpolation = True
            inner, close = _lex(text, position + 2, nested=True)
            tokens.extend(inner)
            position = close + 1
        elif char == "\\":
            position += 2
        elif char == '"':
            literal = text[start : position + 1]
            kind: TokenKind = "string"
            if has_interpolation:
                # An interpolated string is not a constant key; keep it out of path steps.
                kind = "format"
            return [Token(kind, literal, start), *tokens], position + 1
        else:
            position += 1
    raise JqSyntaxError(f"unterminated string starting at column {start + 1}")


def _is_ident_start(char: str) -> bool:
    return char.isalpha() or char == "_"


def _ident_end(text: str, position: int) -> int:
    while position < len(text) and (
        text[position].isalnum() or text[position] == "_" or text.startswith("::", position)
    ):
        position += 2 if text.startswith("::", position) else 1
    return position


def _number_end(text: str, position: int) -> int:
    while position < len(text) and (text[position].isdigit() or text[position] == "."):
        position += 1
    if position < len(text) and text[position] in "eE":
        position += 1
        if position < len(text) and text[position] in "+-":
            position += 1
        while position < len(text) and text[position].isdigit():
            position += 1
    return position
