"""Rule implementations: one module per rule (`llm004.py` defines a `Rule` subclass with `code = "LLM004"`).

Modules named `llm*.py` here are discovered automatically: adding a rule needs no registration edit.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache

from llmdoctor.scan.rule import Rule


@lru_cache(maxsize=1)
def rule_classes() -> dict[str, type[Rule]]:
    """Every implemented rule, by id (imported once per process)."""
    found: dict[str, type[Rule]] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if not info.name.startswith("llm"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, Rule) and value is not Rule and value.code \
                    and value.__module__ == module.__name__:
                found[value.code] = value
    return found
