"""Context budgets: how many prompt tokens fit once room for the answer is kept.

A prompt fits when tokens + reserve ≤ context, where reserve = ceil(context × fraction) or the request's own
max_tokens / max_completion_tokens when that is larger (the API refuses a request whose prompt plus
requested completion exceeds the window).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from pathlib import Path

DEFAULT_RESERVE = 0.15
_TABLE = Path(__file__).resolve().parent.parent / "data" / "context_windows.json"
_SNAPSHOT = re.compile(r"-\d{4}-\d{2}-\d{2}$")


@dataclass(frozen=True)
class ContextWindow:
    model: str  # the table entry that matched
    tokens: int
    source: str


@cache
def context_table() -> dict[str, ContextWindow]:
    data = json.loads(_TABLE.read_text(encoding="utf-8"))
    models = data["models"]
    return {name: ContextWindow(name, entry["context"], entry["source"]) for name, entry in models.items()}


def known_context(model: str) -> ContextWindow | None:
    """The model's context window: exact name, else the model of a dated snapshot (gpt-4o-2024-08-06)."""
    table = context_table()
    if model in table:
        return table[model]
    base = _SNAPSHOT.sub("", model)
    if base != model and base in table:
        return table[base]
    return None


@dataclass(frozen=True)
class Budget:
    context: int
    reserve: int
    context_source: str  # "--context" or the table entry's source

    @property
    def prompt_budget(self) -> int:
        return self.context - self.reserve

    def fits(self, tokens: int) -> bool:
        return tokens + self.reserve <= self.context


def make_budget(context: int, fraction: float, max_output: int | None, context_source: str) -> Budget:
    reserve = math.ceil(Fraction(str(fraction)) * context)  # exact: 0.15 × 128000 is 19200, not 19200.000…04
    if max_output is not None and max_output > reserve:
        reserve = max_output
    return Budget(context, reserve, context_source)
