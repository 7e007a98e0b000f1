"""One error tree (DESIGN.md §4): every exception class phalanx defines is under
``PhalanxError`` and drawn, with its module, in ``domain/errors.py``'s docstring."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from types import ModuleType

import pytest

import phalanx
from phalanx.domain import errors
from phalanx.domain.errors import PhalanxError

#: Optional extras (pyproject.toml) and heavy libraries a module may import at its top.
OPTIONAL = frozenset({"ray", "psycopg", "s3fs", "torch"})


def _modules() -> list[ModuleType]:
    """Every module of phalanx that imports here (``__main__`` modules run: left out)."""
    found = []
    for info in pkgutil.walk_packages(phalanx.__path__, "phalanx."):
        if info.name.rsplit(".", 1)[-1] == "__main__":
            continue
        try:
            found.append(importlib.import_module(info.name))
        except ModuleNotFoundError as missing:
            if (missing.name or "").split(".")[0] not in OPTIONAL:
                raise
    return found


def _exceptions() -> list[type[BaseException]]:
    """Every exception class defined in a module of phalanx, once, by qualified name."""
    seen: dict[str, type[BaseException]] = {}
    for module in _modules():
        for value in vars(module).values():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__.split(".")[0] == "phalanx"
            ):
                seen[f"{value.__module__}.{value.__qualname__}"] = value
    return [seen[name] for name in sorted(seen)]


EXCEPTIONS = _exceptions()


def test_the_walk_finds_the_classes_of_the_layers() -> None:
    names = {cls.__name__ for cls in EXCEPTIONS}
    assert {"PhalanxError", "GraphError", "ClientError", "ApiError", "LoginRequired"} <= names


@pytest.mark.parametrize("cls", EXCEPTIONS, ids=lambda cls: f"{cls.__module__}.{cls.__name__}")
def test_every_exception_is_under_the_one_root(cls: type[BaseException]) -> None:
    assert issubclass(cls, PhalanxError), (
        f"{cls.__module__}.{cls.__qualname__} is not a PhalanxError: subclass PhalanxError or "
        "one of its branches (phalanx.domain.errors)"
    )


@pytest.mark.parametrize("cls", EXCEPTIONS, ids=lambda cls: f"{cls.__module__}.{cls.__name__}")
def test_every_exception_is_drawn_in_the_tree(cls: type[BaseException]) -> None:
    """A line of the docstring's tree names the class and, for one defined elsewhere,
    its module as ``(module)`` (without ``phalanx.``)."""
    assert errors.__doc__ is not None
    module = cls.__module__.removeprefix("phalanx.")
    named = [
        line
        for line in errors.__doc__.splitlines()
        if re.search(rf"(─ |^    ){re.escape(cls.__name__)}\b", line)
    ]
    assert named, f"{cls.__name__} ({module}) is missing from domain/errors.py's tree"
    if cls.__module__ != errors.__name__:
        assert any(f"({module})" in line for line in named), (
            f"{cls.__name__}'s line in domain/errors.py's tree does not name ({module})"
        )
