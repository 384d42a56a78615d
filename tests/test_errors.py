"""The exception tree drawn in sparkcep.errors is the one in the code: every class, its parent and its module."""

from __future__ import annotations

import importlib
import pkgutil
import re

import sparkcep
from sparkcep import errors
from sparkcep.errors import SparkcepError

# A drawn line: "├── Name   path/of/module.py   what it means", indented by "│" under its parent (the root names
# its module too).
DRAWN = re.compile(r"^[\s│]*(?:[├└]── )?(\w+(?:Error|Problem|Mismatch|Incomplete))\s+(\S+\.py)\b", re.MULTILINE)
INTERNAL = {"FieldProblem", "ApiError"}  # named in the docstring as staying inside their layer


def defined_exceptions() -> dict[str, tuple[str, type[Exception]]]:
    """Every exception class defined in the package: name -> (module path, class)."""
    found: dict[str, tuple[str, type[Exception]]] = {}
    for info in pkgutil.walk_packages(sparkcep.__path__, "sparkcep."):
        if info.name.startswith("sparkcep.cli"):  # the command line's own click exception stays there
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, Exception) and value.__module__ == info.name:
                path = info.name.removeprefix("sparkcep.").replace(".", "/") + ".py"
                found[value.__name__] = (path, value)
    return found


def test_every_exception_is_drawn_with_its_module_and_derives_from_the_root() -> None:
    assert errors.__doc__ is not None
    drawn = dict(DRAWN.findall(errors.__doc__))
    defined = defined_exceptions()
    public = {name: where for name, where in defined.items() if name not in INTERNAL}
    assert {name: path for name, (path, _cls) in public.items()} == drawn
    assert [name for name, (_path, cls) in public.items() if not issubclass(cls, SparkcepError)] == []
    assert set(defined) >= INTERNAL and all(name in errors.__doc__ for name in INTERNAL)
