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


def show(expr: z3.ExprRef) -> str:
    """A compact infix rendering. It works on Z3's s-expression text: walking the AST
    through Z3's Python API costs milliseconds per node, which thousands of paths notice."""
    return _infix(_expand_lets(parse_sexpr(expr.sexpr()), {}))


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


def _expand_lets(node, env):
    """Replace Z3's ``(let ((a!1 term)) body)`` sharing by the terms themselves."""
    if isinstance(node, str):
        return env.get(node, node)
    if node and node[0] == "let":
        inner = dict(env)
        for name, value in node[1]:
            inner[name] = _expand_lets(value, env)
        return _expand_lets(node[2], inner)
    return [_expand_lets(part, env) for part in node]


def _infix(node) -> str:
    if isinstance(node, str):
        return node
    head, args = node[0], node[1:]
    if head == "not" and isinstance(args[0], list) and args[0][0] == "=":
        return f"{_infix_arg(args[0][1])} != {_infix_arg(args[0][2])}"
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


def _infix_arg(node) -> str:
    text = _infix(node)
    compound = isinstance(node, list) and (node[0] in _INFIX or node[0] in ("not", "-"))
    return f"({text})" if compound else text
