"""Z3 terms as text: a small s-expression reader and a compact infix printer."""

import re

import z3

_INFIX = {
    "=": "==",
    "<=": "<=",
    ">=": ">=",
    "<": "<",
    ">": ">",
    "+": "+",
    "*": "*",
    "and": "and",
    "or": "or",
    "=>": "implies",
}

_NEGATED = {"<=": ">", "<": ">=", ">=": "<", ">": "<="}


def show(expr: z3.ExprRef) -> str:
    """A compact infix rendering. It works on Z3's s-expression text: walking the AST
    through Z3's Python API costs milliseconds per node, which thousands of paths notice."""
    return _infix(expand_lets(parse_sexpr(expr.sexpr()), {}))


def parse_sexpr(text: str):
    tokens = re.findall(r"\(|\)|\|[^|]*\||[^\s()]+", text)
    stack: list[list] = [[]]
    for token in tokens:
        if token == "(":
            stack.append([])
        elif token == ")":
            done = stack.pop()
            stack[-1].append(done)
        else:
            stack[-1].append(token.strip("|"))
    return stack[0][0]


def expand_lets(node, env):
    """Replace Z3's ``(let ((a!1 term)) body)`` sharing by the terms themselves."""
    if isinstance(node, str):
        return env.get(node, node)
    if node and node[0] == "let":
        inner = dict(env)
        for name, value in node[1]:
            inner[name] = expand_lets(value, env)
        return expand_lets(node[2], inner)
    return [expand_lets(part, env) for part in node]


def _infix(node) -> str:
    if isinstance(node, str):
        return node
    head, args = node[0], node[1:]
    if head == "not" and isinstance(args[0], list) and args[0][0] in _NEGATED and len(args[0]) == 3:
        return f"{_infix_arg(args[0][1])} {_NEGATED[args[0][0]]} {_infix_arg(args[0][2])}"
    if head == "not" and _is_presence(args[0]):
        return f"{_infix_arg(args[0][1])} not in {args[0][0].removesuffix('.present')}"
    if _is_presence(node):
        return f"{_infix_arg(args[0])} in {head.removesuffix('.present')}"
    if head == "not" and isinstance(args[0], list) and args[0][0] == "=" and len(args[0]) == 3:
        left, right = _reading_order(args[0][1:])
        return f"{_infix_arg(left)} != {_infix_arg(right)}"
    if head == "=" and len(args) == 2:
        left, right = _reading_order(args)
        return f"{_infix_arg(left)} == {_infix_arg(right)}"
    if head == "not":
        return f"not {_infix_arg(args[0])}"
    if head == "-" and len(args) == 1:
        return f"-{_infix_arg(args[0])}"
    if head == "-":
        return " - ".join(_infix_arg(arg) for arg in args)
    if head in _INFIX:
        return f" {_INFIX[head]} ".join(_infix_arg(arg) for arg in args)
    if head == "ite":
        return f"({_infix(args[1])} if {_infix(args[0])} else {_infix(args[2])})"
    return f"{head}({', '.join(_infix(arg) for arg in args)})"


def _reading_order(sides: list) -> list:
    """The two sides of an equality as one reads them: call A's names before call B's,
    names before numbers (``A.k == B.k``, ``B.fd == 5``)."""

    def rank(side) -> int:
        if isinstance(side, str) and side.startswith("A."):
            return 0
        if isinstance(side, str) and side.startswith("B."):
            return 1
        return 3 if isinstance(side, str) and side.lstrip("-").isdigit() else 2

    return sorted(sides, key=rank)


def _is_presence(node) -> bool:
    """``m.present(k)``: whether key ``k`` is in partial map ``m``, printed ``k in m``."""
    return isinstance(node, list) and len(node) == 2 and node[0].endswith(".present")


def _infix_arg(node) -> str:
    text = _infix(node)
    compound = isinstance(node, list) and (
        node[0] in _INFIX or node[0] in ("not", "-") or _is_presence(node)
    )
    return f"({text})" if compound else text


_LET_NAME = re.compile(r"([$?]x)(\d+)\b")


def numbered_lets(smtlib: str) -> str:
    """Z3's SMT-LIB text with its let names (``$x<id>``, ``?x<id>``, from the terms' ids)
    numbered in order of first appearance: one formula prints the same whatever ids the
    process gave its terms (a query that ran out of time under load leaves other ids)."""
    numbers: dict[str, str] = {}

    def renumbered(match: re.Match) -> str:
        name = match.group(0)
        if name not in numbers:
            numbers[name] = f"{match.group(1)}{len(numbers)}"
        return numbers[name]

    return _LET_NAME.sub(renumbered, smtlib)
