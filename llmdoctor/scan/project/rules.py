"""Rules that ask the project model directly instead of visiting one file's libcst tree (LLM004 follows calls
across modules). One module per rule in `llmdoctor/scan/project/`, named like the rule (`llm004.py`),
defining a `ProjectRule` subclass; found without a registration edit and without importing libcst."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import ClassVar

from llmdoctor.report.model import Finding


class ProjectRule:
    code: ClassVar[str] = ""

    def __init__(self, spec, catalog, model, show: Callable[[str], str]) -> None:
        self.spec = spec
        self.catalog = catalog
        self.model = model
        self.show = show  # a model path as reports print it

    def check(self, path: str, shown_path: str) -> Iterator[tuple[Finding, tuple[int, ...]]]:
        """Candidate findings in the module at `path` (reported as `shown_path`), each with the lines whose
        suppression comments silence it."""
        raise NotImplementedError


@lru_cache(maxsize=1)
def project_rules() -> dict[str, type[ProjectRule]]:
    import llmdoctor.scan.project as package

    found: dict[str, type[ProjectRule]] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if not (info.name.startswith("llm") and info.name[3:].isdigit()):
            continue
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, ProjectRule) and value is not ProjectRule \
                    and value.code and value.__module__ == module.__name__:
                found[value.code] = value
    return found
