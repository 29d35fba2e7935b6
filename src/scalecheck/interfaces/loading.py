"""Finding a model: a shipped model's name (the SHIPPED table beside this module), or a
user's Python file (``path.py[:Class]``)."""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib
import importlib.util
import inspect
import sys
from pathlib import Path

import scalecheck.engine
import scalecheck.interfaces
import scalecheck.model
from scalecheck import __version__
from scalecheck.common.errors import UserError
from scalecheck.engine.types import ScalarType
from scalecheck.interfaces import SHIPPED
from scalecheck.model import Model


# Once per process: every stage asks for the model by its spec, and a model file runs once.
@functools.cache
def load_model(spec: str):
    """The model class named by ``spec``; one-line UserError when it cannot be had."""
    if spec in SHIPPED:
        module_name, class_name = SHIPPED[spec].split(":")
        return getattr(importlib.import_module(module_name), class_name)
    path_text, _, class_name = spec.partition(":")
    path = Path(path_text)
    if path.suffix != ".py" or not path.is_file():
        known = ", ".join(sorted(SHIPPED))
        raise UserError(
            f"unknown model {spec!r}: give a shipped model ({known}) or a path to a .py file"
        )
    module_name = (
        f"scalecheck_user_model_{hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]}"
    )
    # Modules beside the model file are importable from it, as from a script.
    if str(path.resolve().parent) not in sys.path:
        sys.path.insert(0, str(path.resolve().parent))
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    if module_spec is None or module_spec.loader is None:
        raise UserError(f"model file {path}: not a Python module")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module
    try:
        module_spec.loader.exec_module(module)
    except SyntaxError as err:
        raise UserError(
            f"model file {path}: syntax error at line {err.lineno}: {err.msg}"
        ) from None
    except Exception as err:
        raise UserError(f"model file {path} failed to load: {type(err).__name__}: {err}") from None
    models = [
        obj
        for obj in vars(module).values()
        if inspect.isclass(obj)
        and issubclass(obj, Model)
        and obj is not Model
        and obj.__module__ == module_name
    ]
    if class_name:
        models = [obj for obj in models if obj.__name__ == class_name]
    if len(models) != 1:
        names = ", ".join(obj.__name__ for obj in models) or "none"
        raise UserError(
            f"model file {path}: expected exactly one Model subclass (name one with "
            f"{path}:ClassName), found {names}"
        )
    if not models[0].operations():
        raise UserError(f"model {models[0].__name__} in {path} declares no @operation")
    check_argument_types(models[0])
    return models[0]


def check_argument_types(model_cls) -> None:
    """Every argument of every operation has a type the engine makes symbolic values of
    (docs/analyzer.md); one line naming the first that has not."""
    for name, operation in model_cls.operations().items():
        for argument, symtype in operation.argument_types.items():
            if isinstance(symtype, ScalarType):
                continue
            where = f"model {model_cls.__name__}: operation {name}, argument {argument}"
            if isinstance(symtype, type) and issubclass(symtype, ScalarType):
                raise UserError(
                    f"{where}: give an instance, {symtype.__name__}(...), not the class"
                )
            shown = symtype.__name__ if isinstance(symtype, type) else repr(symtype)
            raise UserError(
                f"{where}: type {shown} is not supported; an argument is a Bool(), Int(), "
                "Uninterpreted(), Key() or Enum() (docs/analyzer.md)"
            )


def model_fingerprint(model_cls) -> str:
    """Changes when the model's file, a module of the model it imports, or the engine
    changes, so that analysis results of another model version are neither reused nor
    turned into tests."""
    digest = hashlib.sha256(f"scalecheck {__version__}\n".encode())
    for source in sorted(_engine_sources()) + _model_sources(Path(inspect.getfile(model_cls))):
        digest.update(f"{source.name}\n".encode() + source.read_bytes())
    return digest.hexdigest()[:16]


def _engine_sources() -> list[Path]:
    """The analyzer's own code: the symbolic engine and the model-writing API."""
    return [
        source
        for package in (scalecheck.engine, scalecheck.model)
        for source in Path(inspect.getfile(package)).parent.glob("*.py")
    ]


def _model_sources(model_file: Path) -> list[Path]:
    """The model's file and, transitively, every module it imports that belongs to the
    model: files beside it and the shipped models. The standard library, scalecheck's
    engine (hashed on its own) and other installed packages are left out."""
    model_dirs = {model_file.resolve().parent, Path(inspect.getfile(scalecheck.interfaces)).parent}
    found, todo = [], [model_file.resolve()]
    while todo:
        source = todo.pop()
        if source in found:
            continue
        found.append(source)
        for name in _imported_names(source):
            origin = _module_origin(name, source.parent)
            if origin is not None and origin.parent in model_dirs:
                todo.append(origin)
    return found


def _imported_names(source: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(source.read_bytes(), str(source))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
            names += [f"{node.module}.{alias.name}" for alias in node.names]
    return names


def _module_origin(name: str, beside: Path) -> Path | None:
    """The file of module ``name`` as the model would import it: a module beside the
    model first, else whatever the import system finds."""
    local = beside / (name.replace(".", "/") + ".py")
    if local.is_file():
        return local.resolve()
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None  # e.g. "package.function" from `from package import function`
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin).resolve()
