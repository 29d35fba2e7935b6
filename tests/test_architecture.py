"""The shape of the package: every module imports on its own, no import cycles, no stage
imports a later one, the run loop apart from its targets, one name per module, and the
scripts in bench/ use the documented API only."""

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"
PACKAGE = SRC / "scalecheck"


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _imports(path: Path) -> set[str]:
    """The scalecheck modules a file imports anywhere in it (inside functions too): a
    module imported inside a function still closes a cycle, only later."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # `from package import module` imports the module; `from module import name`
            # imports the module the name is in.
            names = [
                f"{node.module}.{alias.name}"
                if f"{node.module}.{alias.name}" in MODULES
                else node.module
                for alias in node.names
            ]
        else:
            continue
        found.update(name for name in names if name in MODULES)
    return found


GRAPH = {name: _imports(path) for name, path in MODULES.items()}


def _cycle() -> list[str] | None:
    """One import cycle among the package's modules, or None."""
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(name: str) -> list[str] | None:
        state[name] = "open"
        stack.append(name)
        for imported in sorted(GRAPH[name]):
            if state.get(imported) == "open":
                return [*stack[stack.index(imported) :], imported]
            if imported not in state:
                found = visit(imported)
                if found:
                    return found
        stack.pop()
        state[name] = "done"
        return None

    for name in sorted(GRAPH):
        if name not in state:
            found = visit(name)
            if found:
                return found
    return None


def test_no_import_cycle():
    assert _cycle() is None, " -> ".join(_cycle() or [])


def test_the_cycle_check_finds_a_cycle(monkeypatch):
    monkeypatch.setitem(GRAPH, "scalecheck.common.errors", {"scalecheck.cli"})
    assert _cycle() is not None


def test_every_module_imports_alone_in_a_fresh_interpreter():
    failed = []
    for name in MODULES:
        done = subprocess.run(
            [sys.executable, "-c", f"import {name}"], capture_output=True, text=True, cwd=REPO
        )
        if done.returncode:
            failed.append(f"{name}: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    assert not failed, failed


def _reaches(start: str, prefix: str) -> set[str]:
    """Modules under ``prefix`` that ``start`` imports, directly or not."""
    seen, todo = set(), [start]
    while todo:
        for imported in GRAPH[todo.pop()]:
            if imported not in seen:
                seen.add(imported)
                todo.append(imported)
    return {name for name in seen if name == prefix or name.startswith(prefix + ".")}


def test_the_run_loop_knows_no_target_and_no_target_the_loop():
    wings = ("scalecheck.run.linux", "scalecheck.run.user")
    # The commands (run, kernel) choose or feed a target: they alone know the wings.
    generic = [
        name
        for name in MODULES
        if name.startswith("scalecheck.run.")
        and not name.startswith(wings)
        and not name.endswith("_cli")
    ]
    assert "scalecheck.run.loop" in generic
    for name in generic:
        for wing in wings:
            assert not _reaches(name, wing), f"{name} imports {_reaches(name, wing)}"
    for name in MODULES:
        for wing, other in (wings, wings[::-1]):
            if name.startswith(wing):
                assert "scalecheck.run.loop" not in _reaches(name, "scalecheck.run.loop")
                assert not _reaches(name, other), f"{name} imports {_reaches(name, other)}"


def test_no_module_name_is_used_twice():
    folders = [PACKAGE, REPO / "tracer", REPO / "native" / "harness"]
    skipped = {"target", "build", "bin", "__pycache__"}
    seen: dict[str, Path] = {}
    twice = []
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            if path.suffix not in (".py", ".c", ".h", ".rs") or path.name == "__init__.py":
                continue
            if skipped & set(path.relative_to(REPO).parts):
                continue
            if path.name in seen:
                twice.append(f"{seen[path.name].relative_to(REPO)} and {path.relative_to(REPO)}")
            seen[path.name] = path
    assert not twice, twice


# The package's layers in pipeline order: a module may import its own layer and the ones
# before it, never a later one. The model language and the engine are one layer: the
# language's types are the engine's, and the engine reads the language's result markers.
LAYERS = [
    ("scalecheck", "scalecheck.common"),
    ("scalecheck.model", "scalecheck.engine"),
    ("scalecheck.interfaces",),
    ("scalecheck.binding",),
    ("scalecheck.formats",),
    ("scalecheck.analyze",),
    ("scalecheck.testgen",),
    ("scalecheck.run",),
    ("scalecheck.report",),
    ("scalecheck.bench",),
    ("scalecheck.pipeline", "scalecheck.cli", "scalecheck.api"),
]


def _layer(name: str) -> int:
    """The index of the layer a module belongs to: its longest matching prefix."""
    best, found = "", None
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (name == prefix or name.startswith(prefix + ".")) and len(prefix) > len(best):
                best, found = prefix, index
    assert found is not None, f"{name} is in no layer of LAYERS"
    return found


def _later_imports(graph: dict[str, set[str]]) -> list[str]:
    return [
        f"{name} imports {imported}"
        for name, imports in sorted(graph.items())
        for imported in sorted(imports)
        if _layer(imported) > _layer(name)
    ]


def test_no_stage_imports_a_later_stage():
    assert not _later_imports(GRAPH), _later_imports(GRAPH)


def test_the_stage_check_finds_a_later_import(monkeypatch):
    monkeypatch.setitem(GRAPH, "scalecheck.testgen.refine", {"scalecheck.report.build"})
    assert _later_imports(GRAPH) == ["scalecheck.testgen.refine imports scalecheck.report.build"]


def _defines_register(path: Path) -> bool:
    return any(
        isinstance(node, ast.FunctionDef) and node.name == "register"
        for node in ast.parse(path.read_text()).body
    )


def test_no_argparse_below_the_command_layer():
    """Only the commands (each module with a ``register``), the CLI and the argument types
    touch argparse; below them options travel as typed values (run/options.py)."""
    allowed = {"scalecheck.cli", "scalecheck.common.argtypes"}
    below = [
        name
        for name, path in MODULES.items()
        if "argparse" in _imported_names(path)
        and name not in allowed
        and not _defines_register(path)
    ]
    assert not below, below


def _imported_names(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_run_options_defaults_are_the_commands():
    """`scalecheck run` and `pipeline` with no options give RunOptions' defaults: one
    declaration of each."""
    from scalecheck.cli import build_parser
    from scalecheck.run.options import DEFAULTS, RunOptions

    parser = build_parser()
    for argv in (["run", "DIR"], ["pipeline"]):
        assert RunOptions.from_args(parser.parse_args(argv)) == DEFAULTS


def test_a_run_as_a_function_builds_no_parser(monkeypatch, tmp_path):
    import argparse

    import pytest

    from scalecheck.common.errors import UserError
    from scalecheck.run.run_cli import run_tests

    def no_parser(*args, **kwargs):
        raise AssertionError("an argparse parser below the command layer")

    monkeypatch.setattr(argparse, "ArgumentParser", no_parser)
    with pytest.raises(UserError, match="unknown target"):
        run_tests(tmp_path, target="sv7", quiet=True)
    with pytest.raises(TypeError, match="no_such_option"):
        run_tests(tmp_path, no_such_option=1)


# The house's longest function, in lines (Python and C alike).
MAX_LINES = 60


def _long_python_functions() -> list[str]:
    found = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_LINES:
                    found.append(f"{name}.{node.name}: {lines} lines")
    return found


def _long_c_functions(text: str) -> list[str]:
    """Functions of a C file in the tracer's style (the signature at the start of a line,
    its brace alone on the next, the closing brace alone at the start of a line)."""
    found, start = [], None
    lines = text.splitlines()
    for number, line in enumerate(lines):
        if start is None and line == "{" and number and lines[number - 1][:1].isalpha():
            start = number - 1
        elif start is not None and line == "}":
            if number - start + 1 > MAX_LINES:
                found.append(f"{lines[start]}: {number - start + 1} lines")
            start = None
    return found


def test_functions_are_short():
    assert not _long_python_functions(), _long_python_functions()
    long_c = [
        f"{path.relative_to(REPO)}: {found}"
        for path in sorted((REPO / "tracer").rglob("*.c"))
        if not {"target", "build"} & set(path.relative_to(REPO).parts)
        for found in _long_c_functions(path.read_text())
    ]
    assert not long_c, long_c


def test_the_length_check_finds_a_long_c_function():
    body = "\n".join(["\tx++;"] * MAX_LINES)
    assert _long_c_functions(f"static void f(void)\n{{\n{body}\n}}\n")


def test_libsv6_builds_without_the_tracers_tree():
    """libsv6 is a library of its own: its sources include nothing of tracer/ and its
    Makefile and manifest add no include path into it (the harness finds its allocator's
    weak hooks by symbol)."""
    libsv6 = REPO / "native" / "libsv6"
    naming = [
        f"{path.relative_to(REPO)}: {line.strip()}"
        for pattern in ("src/*.[ch]", "include/sv6/*.h", "Makefile", "scalecheck/*.toml")
        for path in libsv6.glob(pattern)
        for line in path.read_text().splitlines()
        if ("-I" in line and "tracer" in line) or line.startswith('#include "scalecheck_')
    ]
    assert not naming, naming


# The documented API (docs/api.md): what bench/ and a user's script may import.
API = "scalecheck.api"
API_DOC = REPO / "docs" / "api.md"


def _scalecheck_imports(text: str) -> set[str]:
    """What a script imports of scalecheck, as written (`from scalecheck import api` is
    "scalecheck.api")."""
    found = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "scalecheck":
                found.update(f"scalecheck.{alias.name}" for alias in node.names)
            else:
                found.add(node.module)
    return {name for name in found if name == "scalecheck" or name.startswith("scalecheck.")}


def _beyond_the_api(text: str) -> set[str]:
    return _scalecheck_imports(text) - {API}


def test_bench_scripts_import_only_the_api():
    scripts = sorted((REPO / "bench").rglob("*.py"))
    assert len(scripts) > 10
    found = {
        str(path.relative_to(REPO)): sorted(_beyond_the_api(path.read_text()))
        for path in scripts
        if _beyond_the_api(path.read_text())
    }
    assert not found, found


def test_the_bench_check_finds_an_internal_import():
    assert _beyond_the_api("from scalecheck import api\nimport json\n") == set()
    assert _beyond_the_api("from scalecheck.api import run_tests\n") == set()
    assert _beyond_the_api("def f():\n    from scalecheck.run import loop\n") == {"scalecheck.run"}
    assert _beyond_the_api("from scalecheck import cli\n") == {"scalecheck.cli"}


def test_nothing_in_the_package_imports_the_api():
    """The API is the package's front door, not a shortcut between its stages."""
    assert not [name for name, imports in GRAPH.items() if API in imports]


# At most this many lines to a wrapper in the API: a longer one is a feature, whose home
# is its stage.
MAX_WRAPPER_LINES = 15


def test_the_api_only_reexports_and_wraps():
    """No argparse, no class, no logic of its own at module level: imports, __all__,
    constants taken from a stage and short documented wrappers."""
    tree = ast.parse(MODULES[API].read_text())
    assert "argparse" not in _imported_names(MODULES[API])
    problems = []
    for node in tree.body[1:]:
        if isinstance(node, ast.Import | ast.ImportFrom):
            continue
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute | ast.List):
            continue
        if isinstance(node, ast.FunctionDef):
            lines = node.end_lineno - node.lineno + 1
            if lines > MAX_WRAPPER_LINES or not ast.get_docstring(node):
                problems.append(
                    f"{node.name}: {lines} lines, docstring: {bool(ast.get_docstring(node))}"
                )
            continue
        problems.append(f"line {node.lineno}: {type(node).__name__}")
    assert not problems, problems


def test_every_api_name_is_documented_and_every_documented_name_exists():
    import re

    from scalecheck import api

    names = api.__all__
    assert len(names) == len(set(names))
    missing = [name for name in names if not hasattr(api, name)]
    assert not missing, missing
    undocumented = [
        name
        for name in names
        if callable(getattr(api, name)) and not (getattr(api, name).__doc__ or "").strip()
    ]
    assert not undocumented, undocumented
    # The first column of docs/api.md's tables: `name(...)` or `NAME`.
    documented = re.findall(r"^\| `(\w+)[(`]", API_DOC.read_text(), re.MULTILINE)
    assert sorted(documented) == sorted(names), set(documented) ^ set(names)
