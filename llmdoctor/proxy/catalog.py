"""The proxy rules' documentation: one YAML per rule under `rules/proxy/` (knowledge as data).

A rule file has `id`, `kind` (the proxy it checks), `name`, `severity`, `summary`, `why` (with the measured
figure or the cited source), `example`, `use_instead`, `fix_safety`, `measured` (how the verdict was observed,
or the source of a default where no binary runs here) and `examples: {hit: [...], near_miss: [...]}`; each
example is a config of the rule's kind, which tests/test_proxy_rules.py checks. Files with `kind: knowledge`
hold data the checks read (e.g. ingress-nginx.yaml).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from llmdoctor.errors import UserError
from llmdoctor.report.model import SEVERITIES, RuleInfo

KINDS = ("haproxy", "caddy", "apache", "kubernetes", "envoy", "traefik")
REQUIRED = ("id", "kind", "name", "severity", "summary", "why", "example", "use_instead", "fix_safety", "measured")


@dataclass(frozen=True)
class RuleDoc:
    id: str
    kind: str
    name: str
    severity: str
    summary: str
    why: str
    example: str
    use_instead: str
    fix_safety: str
    measured: str
    hits: tuple[str, ...] = field(default_factory=tuple)
    near_misses: tuple[str, ...] = field(default_factory=tuple)
    path: str = ""

    def info(self) -> RuleInfo:
        help_text = (f"{self.summary}\n\n## Why it matters\n{self.why}\n\n## Example\n```\n{self.example}```\n\n"
                     f"## Use instead\n```\n{self.use_instead}```\n\n## Fix safety\n{self.fix_safety}\n\n"
                     f"## How this was established\n{self.measured}")
        return RuleInfo(self.id, self.name, self.severity, self.summary, help_text)


def rules_dir() -> Path:
    """`llmdoctor/rules/proxy` inside a wheel, else the repository's `rules/proxy`."""
    package_dir = Path(__file__).resolve().parent.parent
    inside = package_dir / "rules" / "proxy"
    return inside if inside.is_dir() else package_dir.parent / "rules" / "proxy"


@lru_cache(maxsize=1)
def load() -> dict[str, RuleDoc]:
    import yaml

    directory = rules_dir()
    rules: dict[str, RuleDoc] = {}
    for path in sorted(directory.glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("kind") == "knowledge":
            continue
        missing = [key for key in REQUIRED if not str(data.get(key) or "").strip()]
        if missing:
            raise UserError(f"{path}: missing {', '.join(missing)} (the installation is broken; reinstall)")
        if data["severity"] not in SEVERITIES or data["kind"] not in KINDS:
            raise UserError(f"{path}: severity or kind is not one of {SEVERITIES} / {KINDS}")
        examples = data.get("examples") or {}
        rules[data["id"]] = RuleDoc(
            **{key: str(data[key]) for key in REQUIRED},
            hits=tuple(examples.get("hit") or ()), near_misses=tuple(examples.get("near_miss") or ()),
            path=str(path),
        )
    return rules


def infos(kinds: set[str] | None = None) -> list[RuleInfo]:
    return [doc.info() for doc in load().values() if kinds is None or doc.kind in kinds]
