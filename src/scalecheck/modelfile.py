"""Finding a model: a shipped model's name, or a user's Python file (``path.py[:Class]``)."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import sys
from pathlib import Path

from scalecheck.errors import UserError
from scalecheck.model import Model
from scalecheck.models import SHIPPED


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
    return models[0]


def model_fingerprint(model_cls) -> str:
    """Changes when the model's source changes, so stale analysis results are not reused."""
    source = inspect.getsource(sys.modules[model_cls.__module__])
    return hashlib.sha256(source.encode()).hexdigest()[:16]
