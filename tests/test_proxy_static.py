"""`llmdoctor proxy` without running a server: recognising inputs, reading each kind the way the server does,
bounds on hostile input, the timeout chain, and the command line (the installed command). ~6 s."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from conftest import FIXTURES

from llmdoctor.proxy import durations
from llmdoctor.proxy.check import check, detect
from llmdoctor.proxy.inputs import MAX_FILE_BYTES, MAX_INCLUDE_DEPTH
from llmdoctor.proxy.model import Options

PROXY = FIXTURES / "proxy"


def found(*paths, **kwargs) -> list[tuple[str, str, int]]:
    result = check([str(p) for p in paths], **kwargs)
    assert result.report.errors == [], result.report.errors
    return [(f.rule, os.path.basename(f.path), f.line) for f in result.report.findings]


# ----------------------------------------------------------------------------- each kind, on real-looking files


def test_haproxy_debian_defaults_are_milliseconds_and_backends_override_them():
    assert found(PROXY / "haproxy" / "haproxy.cfg") == [("HAP002", "haproxy.cfg", 14),
                                                         ("HAP001", "haproxy.cfg", 26)]
    [route] = [r for r in check([str(PROXY / "haproxy" / "haproxy.cfg")]).layers[0].routes if "vllm" in r.label]
    assert route.limit("idle").seconds == 600.0  # `timeout server 10m` in the backend beats the defaults' 50000


def test_caddyfile_snippets_from_an_imported_file_and_their_arguments():
    assert found(PROXY / "caddy" / "Caddyfile") == [("CDY001", "Caddyfile", 13), ("CDY003", "upstream.caddy", 4)]
    layer = check([str(PROXY / "caddy" / "Caddyfile")]).layers[0]
    assert [r.label for r in layer.routes] == ["reverse_proxy 10.0.0.11:8000 in site llm.example.com handle /v1/*"]
    assert check([str(PROXY / "caddy" / "Caddyfile")], options=Options(caddy_version=(2, 9, 0))).report.findings[0].rule \
        == "CDY003"  # encode flushes per event from 2.9.0


@pytest.mark.skipif(shutil.which("caddy") is None, reason="caddy is not installed")
def test_the_caddyfile_and_caddy_s_own_json_adaptation_give_the_same_findings(tmp_path):
    source = PROXY / "caddy"
    copy = tmp_path / "caddy"
    shutil.copytree(source, copy)
    text = (copy / "snippets" / "upstream.caddy").read_text().replace("{args[0]}", "{args.0}")  # Caddy 2.6 spelling
    (copy / "snippets" / "upstream.caddy").write_text(text)
    adapted = subprocess.run(["caddy", "adapt", "--config", str(copy / "Caddyfile"), "--adapter", "caddyfile"],
                             capture_output=True, text=True, check=True, cwd=copy,
                             env={**os.environ, "HOME": str(tmp_path)})
    (tmp_path / "caddy.json").write_text(adapted.stdout)
    rules_from_file = sorted(r for r, _, _ in found(copy / "Caddyfile"))
    rules_from_json = sorted(r for r, _, _ in found(tmp_path / "caddy.json"))
    assert rules_from_file == rules_from_json == ["CDY001", "CDY003"]


def test_apache_includes_continuations_and_location_proxypass():
    assert found(PROXY / "apache" / "apache2.conf") == [("APA001", "llm.conf", 4)]
    routes = {r.label: r.limit("idle").seconds for r in check([str(PROXY / "apache" / "apache2.conf")]).layers[0].routes}
    assert routes == {"ProxyPass /v1/ -> http://10.0.0.11:8000/v1/ (virtual host llm.example.com)": 60.0,
                      "ProxyPass /v1/embeddings -> http://10.0.0.11:8000/v1/embeddings (virtual host llm.example.com)":
                          600.0}


def test_helm_rendered_manifests_annotations_configmap_and_snippet():
    assert found(PROXY / "kubernetes" / "helm-template.yaml") == [
        ("ING003", "helm-template.yaml", 21),  # "600s" is not an integer: falls back to the ConfigMap's 120
        ("ING004", "helm-template.yaml", 23),  # snippets are off in this ConfigMap
        ("ING005", "helm-template.yaml", 24),  # proxy_buffering is already written by the template
    ]
    [route] = check([str(PROXY / "kubernetes" / "helm-template.yaml")]).layers[0].routes
    assert route.limit("idle").seconds == 120.0


def test_a_configmap_in_another_file_applies_to_the_ingress(tmp_path):
    (tmp_path / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ingress-nginx-controller\n"
                                      "data:\n  proxy-read-timeout: \"900\"\n")
    text = (PROXY / "kubernetes" / "helm-template.yaml").read_text().split("---\n# Source: llm-chart")[1]
    (tmp_path / "ingress.yaml").write_text("# Source: llm-chart" + text)
    result = check([str(tmp_path / "cm.yaml"), str(tmp_path / "ingress.yaml")])
    route = next(r for layer in result.layers for r in layer.routes)
    assert route.limit("idle").seconds == 900.0 and str(route.limit("idle").where).endswith("cm.yaml:6")


def test_envoy_route_without_timeout_gets_the_15s_default():
    assert found(PROXY / "envoy" / "envoy.yaml") == [("ENV001", "envoy.yaml", 21)]
    routes = check([str(PROXY / "envoy" / "envoy.yaml")]).layers[0].routes
    limits = {r.label: (r.limit("total"), r.limit("idle").seconds) for r in routes}
    chat = limits["route prefix /v1/chat/ in virtual host llm"]
    assert chat[0] is None and chat[1] == 120.0  # timeout 0s disables the total; idle_timeout beats 300s
    rest = limits["route prefix /v1/ in virtual host llm"]
    assert rest[0].seconds == 15.0 and rest[0].where is None and rest[1] == 300.0


def test_traefik_toml_dynamic_and_yaml_static_together():
    assert found(PROXY / "traefik" / "traefik.yml", PROXY / "traefik" / "dynamic.toml") == [
        ("TRF001", "dynamic.toml", 6), ("TRF002", "dynamic.toml", 15), ("TRF003", "traefik.yml", 8)]
    assert found(PROXY / "traefik" / "dynamic.toml") == [("TRF001", "dynamic.toml", 6),
                                                         ("TRF002", "dynamic.toml", 15)]


# ----------------------------------------------------------------------------- recognising the input


@pytest.mark.parametrize(("name", "text", "kind"), [
    ("haproxy.cfg", "", "haproxy"),
    ("lb.cfg", "frontend a\n    bind :80\n    acl x path_beg /v1\n    use_backend b if { path_beg /v1 }\n", "haproxy"),
    ("Caddyfile", "", "caddy"),
    ("site.caddyfile", "", "caddy"),
    ("caddy.json", '{"apps": {"http": {}}}', "caddy-json"),
    ("httpd.conf", "", "apache"),
    ("llm.conf", "<VirtualHost *:80>\n    ProxyPass / http://a/\n</VirtualHost>\n", "apache"),
    ("llm.conf", "server {\n    location / { proxy_pass http://a; }\n}\n", "nginx"),
    ("dump.txt", "# configuration file /etc/nginx/nginx.conf:\nevents {}\n", "nginx"),
    ("x.yaml", "apiVersion: networking.k8s.io/v1\nkind: Ingress\n", "kubernetes"),
    ("-", "---\napiVersion: v1\nkind: List\nitems: []\n", "kubernetes"),
    ("envoy.yaml", "static_resources:\n  listeners: []\n  # route\n", "envoy"),
    ("dynamic.yml", "http:\n  routers:\n    a: {rule: Host(`x`)}\n", "traefik"),
    ("dynamic.toml", "[http.routers.a]\n", "traefik"),
    ("notes.txt", "hello\n", None),
])
def test_each_input_is_recognised_by_name_then_content(name, text, kind):
    assert detect(name, text) == kind


# ----------------------------------------------------------------------------- hostile and broken input


def _errors(*paths, **kwargs):
    return check([str(p) for p in paths], **kwargs).report.errors


def test_a_fifo_behind_an_include_is_refused_by_name(tmp_path):
    (tmp_path / "conf.d").mkdir()
    os.mkfifo(tmp_path / "conf.d" / "trap.conf")
    (tmp_path / "httpd.conf").write_text("Include conf.d/*.conf\nProxyPass / http://a/ timeout=600\n")
    [error] = _errors(tmp_path / "httpd.conf")
    assert error.path.endswith("trap.conf") and "is a named pipe (FIFO)" in error.reason
    assert "refusing to read it through an include" in error.reason


def test_includes_nested_too_deep_and_include_cycles_are_errors_with_file_and_line(tmp_path):
    for index in range(MAX_INCLUDE_DEPTH + 2):
        (tmp_path / f"{index}.conf").write_text(f"Include {index + 1}.conf\n")
    (tmp_path / f"{MAX_INCLUDE_DEPTH + 2}.conf").write_text("ProxyPass / http://a/\n")
    (tmp_path / "httpd.conf").write_text("Include 0.conf\n")
    [error] = _errors(tmp_path / "httpd.conf")
    assert f"nested deeper than {MAX_INCLUDE_DEPTH}" in error.reason
    (tmp_path / "a.caddy").write_text("import b.caddy\n")
    (tmp_path / "b.caddy").write_text("import a.caddy\n")
    (tmp_path / "Caddyfile").write_text("import a.caddy\n:80 {\n\treverse_proxy a:1\n}\n")
    [error] = _errors(tmp_path / "Caddyfile")
    assert "import cycle" in error.reason and error.line == 1


def test_an_oversized_file_and_a_syntax_error_are_named(tmp_path):
    big = tmp_path / "haproxy.cfg"
    with open(big, "wb") as handle:
        handle.truncate(MAX_FILE_BYTES + 1)
    [error] = _errors(big)
    assert "larger than 16 MiB" in error.reason
    bad = tmp_path / "manifests.yaml"
    bad.write_text("apiVersion: v1\nkind: Ingress\nmetadata:\n  name: [unclosed\n")
    [error] = _errors(bad)
    assert error.reason.startswith("YAML syntax error") and error.line == 5
    unclosed = tmp_path / "httpd.conf"
    unclosed.write_text("<VirtualHost *:80>\nProxyPass / http://a/\n")
    [error] = _errors(unclosed)
    assert "never closed" in error.reason


def test_one_bad_input_does_not_stop_the_others(tmp_path):
    result = check([str(tmp_path / "missing.cfg"), str(PROXY / "haproxy" / "haproxy.cfg")])
    assert [e.reason for e in result.report.errors] == ["no such file or directory"]
    assert {f.rule for f in result.report.findings} == {"HAP001", "HAP002"}


# ----------------------------------------------------------------------------- durations


@pytest.mark.parametrize(("parse", "text", "seconds"), [
    (durations.haproxy, "50000", 50.0), (durations.haproxy, "10m", 600.0), (durations.haproxy, "1h", 3600.0),
    (durations.haproxy, "500ms", 0.5), (durations.haproxy, "1x", None),
    (durations.go, "1m30s", 90.0), (durations.go, "300ms", 0.3), (durations.go, "1d", None),
    (durations.caddy, "1d", 86400.0), (durations.caddy, 30_000_000_000, 30.0),
    (durations.traefik, 42, 42.0), (durations.traefik, "42", 42.0), (durations.traefik, "1m", 60.0),
    (durations.gateway, "1h30m", 5400.0), (durations.gateway, "500ms", 0.5), (durations.gateway, "1.5s", None),
    (durations.gateway, "123456s", None),
    (durations.envoy, "15s", 15.0), (durations.envoy, "0.250s", 0.25), (durations.envoy, {"seconds": 3}, 3.0),
    (durations.apache, "300", 300.0), (durations.apache, "500ms", 0.5),
])
def test_each_kind_reads_durations_its_own_way(parse, text, seconds):
    assert parse(text) == seconds


# ----------------------------------------------------------------------------- the timeout chain


def test_the_chain_names_the_layer_that_cuts_first(tmp_path):
    result = check([str(PROXY / "kubernetes" / "helm-template.yaml"), str(PROXY / "haproxy" / "haproxy.cfg"),
                    str(PROXY / "envoy" / "envoy.yaml")], options=Options(client_timeout=600.0),
                   edge_names=("cloudflare",))
    chain = result.chain.to_dict()
    assert chain["client_timeout_s"] == 600.0
    idle = chain["first_to_cut"]["idle"]
    assert idle["seconds"] == 50.0 and idle["setting"] == "timeout server"  # Debian's 50000 ms, backend web
    total = chain["first_to_cut"]["total"]
    assert total["seconds"] == 15.0 and total["where"] is None  # Envoy's default route timeout
    layers = [step["input"] for step in chain["layers"]]
    assert layers[0] == "client" and layers[1] == "Cloudflare (proxied hostname)"
    assert any("Response Buffering" in note for note in chain["notes"])


def test_the_chain_with_route_narrowed_to_the_streamed_paths(tmp_path):
    result = check([str(PROXY / "haproxy" / "haproxy.cfg")], route="vllm")
    assert [r.label for r in result.layers[0].routes] == ["backend vllm (frontend api)"]
    assert result.chain.first["idle"].limits["idle"].seconds == 600.0
    assert {f.rule for f in result.report.findings} == set()  # the web backend's findings are not streamed


def test_the_client_cuts_first_when_every_layer_waits_longer(tmp_path):
    path = tmp_path / "haproxy.cfg"
    path.write_text("defaults\n    mode http\n    timeout server 1h\nlisten a\n    bind :1\n    option http-no-delay\n"
                    "    server s 127.0.0.1:2\n")
    chain = check([str(path)], options=Options(client_timeout=600.0)).chain
    assert chain.first["idle"] is None
    assert "the client's 600 s (10 min) read timeout decides" in "\n".join(chain.lines())


# ----------------------------------------------------------------------------- the installed command


def test_cli_reads_helm_output_from_stdin_and_prints_json(cli):
    manifests = (PROXY / "kubernetes" / "helm-template.yaml").read_text()
    result = cli("proxy", "-", "--format", "json", input=manifests)
    assert result.returncode == 1, result.stderr
    data = json.loads(result.stdout)
    assert [f["rule"] for f in data["findings"]] == ["ING003", "ING004", "ING005"]
    assert {f["path"] for f in data["findings"]} == {"<stdin>"}
    assert data["routes"][0]["route"] == "Ingress llm/vllm llm.example.com/v1"
    assert data["chain"]["layers"][1]["idle"]["seconds"] == 120.0


def test_cli_text_shows_the_chain_for_several_layers_and_exit_codes(cli):
    both = cli("proxy", str(PROXY / "haproxy" / "haproxy.cfg"), str(PROXY / "apache" / "apache2.conf"))
    assert both.returncode == 1
    assert "timeout chain" in both.stdout and "is cut first by" in both.stdout
    quiet = cli("proxy", str(PROXY / "haproxy" / "haproxy.cfg"), "--exit-zero", "--ignore", "HAP")
    assert quiet.returncode == 0 and "All checks passed" in quiet.stdout
    broken = cli("proxy", str(PROXY / "nope.cfg"))
    assert broken.returncode == 2 and "no such file or directory" in broken.stdout
    unknown = cli("proxy", str(PROXY / "haproxy" / "haproxy.cfg"), "--select", "HAP009")
    assert unknown.returncode == 2 and "unknown rule 'HAP009'" in unknown.stderr
    kind = cli("proxy", str(PROXY / "haproxy" / "haproxy.cfg"), "--kind", "iis")
    assert kind.returncode == 2 and "--kind 'iis'" in kind.stderr
    edge = cli("proxy", str(PROXY / "haproxy" / "haproxy.cfg"), "--edge", "akamai")
    assert edge.returncode == 2 and "choose one of cloudflare" in edge.stderr


def test_cli_sarif_carries_proxy_rules(cli):
    result = cli("proxy", str(PROXY / "envoy" / "envoy.yaml"), "--format", "sarif")
    sarif = json.loads(result.stdout)
    rules = {r["id"] for r in sarif["runs"][0]["tool"]["driver"]["rules"]}
    assert {"ENV001", "ENV002", "ENV003"} <= rules
    assert sarif["runs"][0]["results"][0]["ruleId"] == "ENV001"


@pytest.mark.parametrize(("text", "rule"), [
    ("ProxyTimeout 10\nProxyPass /v1/ http://a/\n", "APA001"),
    ("defaults\n    mode http\nlisten a\n    bind :1\n    server s 10.0.0.1:5\n", "HAP001"),
    (":8080 {\n\treverse_proxy a:1 {\n\t\tbuffer_responses\n\t}\n}\n", "CDY002"),
    ("server {\n    location / {\n        proxy_pass http://a;\n    }\n}\n", "NGX001"),
    ((PROXY / "envoy" / "envoy.yaml").read_text(), "ENV001"),
])
def test_every_kind_can_come_from_stdin(text, rule):
    result = check(["-"], stdin_text=text)
    assert result.report.errors == []
    assert rule in {f.rule for f in result.report.findings}
    assert {f.path for f in result.report.findings if f.rule == rule} == {"<stdin>"}


def test_nginx_inputs_report_the_nginx_checks_and_join_the_chain():
    conf = FIXTURES / "nginx" / "rules" / "ngx003_hit.conf"
    result = check([str(conf), str(PROXY / "haproxy" / "haproxy.cfg")], route="/v2/|vllm")
    assert [r.label for r in result.layers[0].routes] == ["location /v2/"]
    assert [(f.rule, f.line) for f in result.report.findings] == [("NGX003", 13)]
    assert result.chain.first["idle"].limits["idle"].setting == "proxy_read_timeout"
    assert result.chain.first["idle"].limits["idle"].seconds == 60.0


def test_a_yaml_bomb_and_a_fifo_without_writer_are_refused_at_once(tmp_path):
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(8))
    (tmp_path / "bomb.yaml").write_text("apiVersion: v1\nkind: List\n" + bomb)
    [error] = _errors(tmp_path / "bomb.yaml")
    assert "more than 200,000 values" in error.reason
    os.mkfifo(tmp_path / "haproxy.cfg")
    [error] = _errors(tmp_path / "haproxy.cfg")
    assert "no process writes to" in error.reason
