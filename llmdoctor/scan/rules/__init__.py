"""Rule implementations: one module per rule (`llm004.py` defines a `Rule` subclass with `code = "LLM004"`).

Modules named `llm*.py` here are discovered automatically: adding a rule needs no registration edit.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache


@lru_cache(maxsize=1)
def rule_classes() -> dict:
    """Every implemented libcst rule, by id (imported once per process)."""
    from llmdoctor.scan.rule import Rule

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


@lru_cache(maxsize=1)
def rule_ids() -> frozenset[str]:
    """The ids of `rule_classes()`, read from the module names (`llm002.py` -> LLM002) without importing the
    modules (they import libcst): a file that no rule's pre-filter keeps is analysed without libcst.
    tests/test_startup_imports.py checks that both agree."""
    return frozenset(info.name.upper() for info in pkgutil.iter_modules(__path__) if info.name.startswith("llm"))


def implemented_rules() -> dict:
    """Every implemented rule by id: the libcst rules here and the project-model rules (llmdoctor/scan/project/)."""
    from llmdoctor.scan.project.rules import project_rules

    return {**rule_classes(), **project_rules()}
