"""The proxy checks in the catalog (rules/<id>.yaml, command: proxy) are the ones the code emits.

Their hit and near-miss examples run through `llmdoctor.proxy.check` in tests/test_catalog.py (RUNNERS).
"""

from __future__ import annotations

import inspect
import re

from llmdoctor.catalog import load_checks
from llmdoctor.proxy import apache, caddy, catalog, envoy, haproxy, kubernetes, traefik


def test_every_check_id_the_code_emits_is_documented_and_the_other_way_round():
    emitted = set()
    for module in (apache, caddy, envoy, haproxy, kubernetes, traefik):
        emitted |= set(re.findall(r'Hit\("([A-Z]+[0-9]{3})"', inspect.getsource(module)))
    assert emitted == load_checks().ids_for("proxy")


def test_each_prefix_names_the_kind_of_config_it_reads():
    for check_id in load_checks().ids_for("proxy"):
        assert catalog.kind_of(check_id) in ("haproxy", "caddy", "apache", "kubernetes", "envoy", "traefik")
