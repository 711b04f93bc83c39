"""Every proxy rule's YAML examples (rules/proxy/*.yaml): hits fire, near-misses stay quiet; the catalog is whole.

Each example is a complete config of the rule's kind, written to a file named as users name it and checked by
`llmdoctor.proxy.check.check`, the same entry point the `proxy` command uses.
"""

from __future__ import annotations

import pytest

from llmdoctor.proxy import catalog
from llmdoctor.proxy.check import check

RULES = catalog.load()
FILE_NAMES = {"haproxy": "haproxy.cfg", "caddy": "Caddyfile", "apache": "httpd.conf",
              "kubernetes": "manifests.yaml", "envoy": "envoy.yaml", "traefik": "dynamic.yaml"}


def _examples(which: str):
    for rule_id, doc in sorted(RULES.items()):
        for index, text in enumerate(doc.hits if which == "hit" else doc.near_misses):
            yield pytest.param(rule_id, text, id=f"{rule_id}-{which}-{index}")


def _fired(tmp_path, rule_id: str, text: str) -> set[str]:
    path = tmp_path / FILE_NAMES[RULES[rule_id].kind]
    path.write_text(text)
    result = check([str(path)])
    assert result.report.errors == [], result.report.errors
    assert result.layers and result.layers[0].kind == RULES[rule_id].kind
    return {f.rule for f in result.report.findings}


@pytest.mark.parametrize(("rule_id", "text"), list(_examples("hit")))
def test_hit_example_fires(tmp_path, monkeypatch, rule_id, text):
    monkeypatch.chdir(tmp_path)
    assert rule_id in _fired(tmp_path, rule_id, text)


@pytest.mark.parametrize(("rule_id", "text"), list(_examples("near_miss")))
def test_near_miss_example_is_quiet(tmp_path, monkeypatch, rule_id, text):
    monkeypatch.chdir(tmp_path)
    assert rule_id not in _fired(tmp_path, rule_id, text)


@pytest.mark.parametrize("rule_id", sorted(RULES))
def test_every_rule_has_docs_and_both_kinds_of_example(rule_id):
    doc = RULES[rule_id]
    assert doc.hits and doc.near_misses
    assert doc.id.startswith({"haproxy": "HAP", "caddy": "CDY", "apache": "APA", "kubernetes": "K8S",
                              "envoy": "ENV", "traefik": "TRF"}[doc.kind])
    for text in (doc.summary, doc.why, doc.example, doc.use_instead, doc.fix_safety, doc.measured):
        assert text.strip()


def test_every_rule_id_the_code_emits_is_documented():
    import inspect
    import re

    from llmdoctor.proxy import apache, caddy, envoy, haproxy, kubernetes, traefik

    emitted = set()
    for module in (apache, caddy, envoy, haproxy, kubernetes, traefik):
        emitted |= set(re.findall(r'Hit\("([A-Z0-9]+)"', inspect.getsource(module)))
    assert emitted == set(RULES)
