"""Where the proxy checks' documentation and data live.

Each check is one `rules/<id>.yaml` with `command: proxy` (the shared catalog, `llmdoctor.catalog`); its id
prefix names the kind of proxy it reads (rules/prefixes.yaml). The data the checks read (what the
ingress-nginx controller renders, the managed edges' documented limits) is under `rules/proxy/`.
"""

from __future__ import annotations

from pathlib import Path

from llmdoctor.report.model import RuleInfo

PREFIX_KIND = {"HAP": "haproxy", "CDY": "caddy", "APA": "apache", "ING": "kubernetes", "GWA": "kubernetes",
               "ENV": "envoy", "TRF": "traefik"}


def rules_dir() -> Path:
    """`llmdoctor/rules/proxy` inside a wheel, else the repository's `rules/proxy` (the checks' data)."""
    from llmdoctor.catalog import shipped_rules_dir

    return shipped_rules_dir() / "proxy"


def kind_of(check_id: str) -> str:
    return PREFIX_KIND[check_id.rstrip("0123456789")]


def infos(kinds: set[str] | None = None) -> list[RuleInfo]:
    """The documented proxy checks of these kinds (all kinds when None)."""
    from llmdoctor.catalog import load_checks

    return [c.info() for c in load_checks().for_command("proxy") if kinds is None or kind_of(c.id) in kinds]


def ids() -> set[str]:
    from llmdoctor.catalog import load_checks

    return load_checks().ids_for("proxy")
