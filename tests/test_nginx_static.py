"""`llmdoctor nginx`: parsing, includes, inheritance, NGX001–NGX007 on fixtures, output and exit codes.

Fixture files mark every finding they must produce with `# expect: RULE ...` on the reported line; a
file must produce exactly those (rule, line) pairs, so near-miss files (no marks) must stay silent.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import llmdoctor_executable

from llmdoctor.nginx.check import check, exit_code
from llmdoctor.nginx.config import Stmt, load_dump, load_file, split_dump
from llmdoctor.nginx.effective import build_levels, parse_time, proxied_units
from llmdoctor.nginx.rules import Options
from llmdoctor.report.model import display_path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nginx"
RULE_FIXTURES = sorted((FIXTURES / "rules").glob("*.conf"))
_EXPECT = re.compile(r"#\s*expect:\s*(?P<rules>[A-Z0-9 ]+)")


def expected_marks(*files: Path) -> set[tuple[str, str, int]]:
    marks = set()
    for path in files:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            match = _EXPECT.search(line)
            if match:
                marks |= {(rule, display_path(path), number) for rule in match.group("rules").split()}
    return marks


def found(report) -> set[tuple[str, str, int]]:
    return {(f.rule, f.path, f.line) for f in report.findings}


# ----------------------------------------------------------------------------- fixtures, rule by rule


@pytest.mark.parametrize("path", RULE_FIXTURES, ids=lambda p: p.stem)
def test_rule_fixture_produces_exactly_its_marked_findings(path):
    report = check([str(path)])
    assert report.errors == []
    assert found(report) == expected_marks(path)


def test_every_rule_has_a_hit_and_a_near_miss():
    names = [p.stem for p in RULE_FIXTURES]
    for number in range(1, 8):
        rule = f"ngx00{number}"
        assert any(n.startswith(rule) and "hit" in n for n in names), rule
        assert any(n.startswith(rule) and "near_miss" in n for n in names), rule
    hits = {rule for p in RULE_FIXTURES for rule, _, _ in expected_marks(p)}
    assert hits == {f"NGX00{n}" for n in range(1, 8)}


def test_ngx001_severity_follows_the_upstream_http_version():
    by_file = {}
    for name in ("ngx001_hit_default", "ngx001_hit_http11", "ngx001_fastcgi"):
        report = check([str(FIXTURES / "rules" / f"{name}.conf")])
        by_file[name] = next(f for f in report.findings if f.rule == "NGX001")
    assert by_file["ngx001_hit_default"].severity == "error"
    assert "HTTP/1.0" in by_file["ngx001_hit_default"].message
    assert "nginx >= 1.29.7 defaults to 1.1" in by_file["ngx001_hit_default"].message
    assert "X-Accel-Buffering: no" in by_file["ngx001_hit_default"].message
    assert by_file["ngx001_hit_default"].fix.startswith("add `proxy_buffering off;` in location /v1/chat/completions")
    assert by_file["ngx001_hit_http11"].severity == "warning"
    assert "framing" in by_file["ngx001_hit_http11"].message
    assert by_file["ngx001_fastcgi"].fix.startswith("add `fastcgi_buffering off;`")


def test_ngx001_default_http_version_is_11_from_nginx_1_29_7():
    path = str(FIXTURES / "rules" / "ngx001_hit_default.conf")
    old = [f for f in check([path], options=Options((1, 29, 6))).findings if f.rule == "NGX001"]
    new = [f for f in check([path], options=Options((1, 29, 7))).findings if f.rule == "NGX001"]
    assert old[0].severity == "error"
    assert new[0].severity == "warning"
    assert "proxy_http_version defaults to 1.1 (nginx >= 1.29.7)" in new[0].message


def test_ngx001_message_says_when_the_upstream_opt_out_is_ignored():
    report = check([str(FIXTURES / "rules" / "ngx002_hit.conf")])
    ngx001 = next(f for f in report.findings if f.rule == "NGX001")
    assert "makes nginx ignore it" in ngx001.message
    ngx002 = next(f for f in report.findings if f.rule == "NGX002")
    assert ngx002.fix == "`proxy_ignore_headers Expires;` (X-Accel-Buffering removed)"


def test_ngx007_names_the_lost_lines_and_where_they_were():
    report = check([str(FIXTURES / "rules" / "ngx007_hit.conf")])
    lost = next(f for f in report.findings if f.rule == "NGX007" and f.line == 13)
    assert '`proxy_set_header Connection "";`' in lost.message
    assert "ngx007_hit.conf:10" in lost.message
    assert lost.fix == 'repeat `proxy_set_header Connection "";` next to this line'


def test_missing_directive_is_reported_at_the_location_and_column_points_at_it():
    report = check([str(FIXTURES / "rules" / "ngx001_hit_default.conf")])
    finding = report.findings[0]
    assert (finding.line, finding.column) == (8, 9)


# ----------------------------------------------------------------------------- includes, dumps, directories


def test_includes_resolve_against_the_main_config_folder_and_globs_in_order():
    main = FIXTURES / "includes" / "nginx.conf"
    config = load_file(main)
    assert config.errors == []
    files = [Path(p).relative_to(main.parent).as_posix() for p in sorted(config.files)]
    assert files == ["conf.d/10-api.conf", "conf.d/20-web.conf", "nginx.conf", "snippets/sse.conf",
                     "snippets/upstreams.conf"]
    servers = [s for s in config.roots[0][1][1].block if s.directive == "server"]
    assert [Path(s.path).name for s in servers] == ["10-api.conf", "20-web.conf"]


def test_includes_fixture_findings_point_into_the_included_files():
    files = sorted((FIXTURES / "includes").rglob("*.conf"))
    report = check([str(FIXTURES / "includes" / "nginx.conf")])
    assert found(report) == expected_marks(*files)
    assert report.files_checked == 5


def test_a_directory_with_nginx_conf_is_read_from_it():
    assert found(check([str(FIXTURES / "includes")])) == found(check([str(FIXTURES / "includes" / "nginx.conf")]))


def test_a_directory_of_site_files_checks_each_file_not_included_by_another(tmp_path):
    (tmp_path / "sites").mkdir()
    (tmp_path / "snippets").mkdir()
    (tmp_path / "sites" / "api.conf").write_text(
        "server {\n  location /v1/ {\n    include snippets/stream.conf;\n    proxy_pass http://app;\n  }\n}\n")
    (tmp_path / "sites" / "web.conf").write_text(
        "server {\n  location / {\n    proxy_pass http://web;\n  }\n}\n")
    (tmp_path / "snippets" / "stream.conf").write_text("proxy_buffering off;\nproxy_read_timeout 1h;\n")
    report = check([str(tmp_path)])
    assert report.errors == []
    web = display_path(tmp_path / "sites" / "web.conf")
    assert found(report) == {("NGX001", web, 2), ("NGX003", web, 2)}


def test_split_dump_reads_nginx_T_output_with_or_without_its_stderr_lines():
    text = (FIXTURES / "dump" / "nginx-T.txt").read_text()
    files = split_dump(text)
    assert next(iter(files)) == "/etc/nginx/nginx.conf"
    assert "upstream llm" in files["/etc/nginx/snippets/upstreams.conf"]
    assert split_dump("events {}\nhttp {}\n") is None


def test_dump_fixture_gives_the_same_findings_as_the_files_it_was_made_from():
    from_dump = check([str(FIXTURES / "dump" / "nginx-T.txt")])
    from_files = check([str(FIXTURES / "includes" / "nginx.conf")])
    prefix = display_path(FIXTURES / "includes")
    assert from_dump.errors == []
    assert {(r, p.replace("/etc/nginx", prefix), n) for r, p, n in found(from_dump)} == found(from_files)


def test_include_cycle_is_an_error_at_the_include_line():
    report = check([str(FIXTURES / "malformed" / "cycle" / "nginx.conf")])
    assert [(e.path, e.line) for e in report.errors] == [(display_path(FIXTURES / "malformed/cycle/b.conf"), 2)]
    assert "include cycle" in report.errors[0].reason
    assert exit_code(report) == 2


@pytest.mark.parametrize("name, line, reason", [
    ("unbalanced.conf", 8, 'unexpected end of file, expecting "}"'),
    ("stray_brace.conf", 6, 'unexpected "}"'),
])
def test_syntax_errors_carry_nginx_s_own_message_and_line(name, line, reason):
    report = check([str(FIXTURES / "malformed" / name)])
    assert [(e.line, e.reason) for e in report.errors] == [(line, f"syntax error: {reason}")]
    assert exit_code(report) == 2


def test_missing_include_and_broken_include_still_check_the_rest():
    missing = check([str(FIXTURES / "malformed" / "missing_include" / "nginx.conf")])
    assert [(e.line, "file not found" in e.reason) for e in missing.errors] == [(3, True)]
    assert found(missing) == expected_marks(FIXTURES / "malformed" / "missing_include" / "nginx.conf")
    assert exit_code(missing) == 2
    broken = check([str(FIXTURES / "malformed" / "broken_include" / "nginx.conf")])
    assert [(Path(e.path).name, e.line) for e in broken.errors] == [("broken.conf", 5)]
    assert found(broken) == expected_marks(FIXTURES / "malformed" / "broken_include" / "nginx.conf")


def test_unreadable_include_is_an_error_at_the_include_line(tmp_path):
    (tmp_path / "dir.conf").mkdir()
    (tmp_path / "nginx.conf").write_text("http {\n  include dir.conf;\n}\n")
    report = check([str(tmp_path / "nginx.conf")])
    # nginx itself fails with `pread() ".../dir.conf" failed (21: Is a directory)`: it exists, so say what it is
    reason = (f"include dir.conf: {tmp_path / 'dir.conf'} is a directory; include takes a file or a glob, "
              "e.g. `include dir.conf/*.conf;`")
    assert [(e.line, e.reason) for e in report.errors] == [(2, reason)]


def test_unreadable_include_is_reported_at_the_include_line(tmp_path, monkeypatch):
    from llmdoctor.nginx import config as config_module

    (tmp_path / "secret.conf").write_text("proxy_buffering off;\n")
    (tmp_path / "nginx.conf").write_text("http {\n  include secret.conf;\n}\n")
    real_read = config_module._Files.read

    def deny(self, path):
        if path.endswith("secret.conf"):
            return None, "cannot read: Permission denied"
        return real_read(self, path)

    monkeypatch.setattr(config_module._Files, "read", deny)
    report = check([str(tmp_path / "nginx.conf")])
    assert [(Path(e.path).name, e.line, e.reason) for e in report.errors] == [
        ("nginx.conf", 2, f"include secret.conf: cannot read: Permission denied: {tmp_path / 'secret.conf'}")]


def test_dump_globs_match_one_path_segment_in_sorted_order():
    dump = ("# configuration file /etc/nginx/nginx.conf:\nhttp { include conf.d/*.conf; }\n\n"
            "# configuration file /etc/nginx/conf.d/b.conf:\nserver { location /b { proxy_pass http://x; } }\n\n"
            "# configuration file /etc/nginx/conf.d/a.conf:\nserver { location /a { proxy_pass http://x; } }\n\n"
            "# configuration file /etc/nginx/conf.d/sub/c.conf:\nserver { location /c { proxy_pass http://x; } }\n")
    config = load_dump(split_dump(dump))
    http = config.roots[0][1][0]
    assert [s.block[0].args for s in http.block] == [["/a"], ["/b"]]


def test_glob_include_that_matches_nothing_is_fine_as_in_nginx(tmp_path):
    (tmp_path / "nginx.conf").write_text("http {\n  include conf.d/*.conf;\n}\n")
    report = check([str(tmp_path / "nginx.conf")])
    assert report.errors == [] and report.findings == []
    assert "nothing to check" in report.notices[0]


# ----------------------------------------------------------------------------- inheritance and values


def _units(tmp_path: Path, text: str):
    (tmp_path / "nginx.conf").write_text(text)
    config = load_file(tmp_path / "nginx.conf")
    return proxied_units(build_levels([s for _, s in config.roots]))


def test_single_value_directives_come_from_the_deepest_level(tmp_path):
    units = _units(tmp_path, "http { proxy_read_timeout 10s;\n server { proxy_read_timeout 20s;\n"
                             "  location /a { location /a/b { proxy_pass http://x; } }\n"
                             "  location /c { proxy_read_timeout 30s; if ($x) { proxy_pass http://x; } } } }\n")
    assert [u.level.single("proxy_read_timeout").args for u in units] == [["20s"], ["30s"]]


def test_list_directives_come_whole_from_one_level(tmp_path):
    units = _units(tmp_path, "http { server { proxy_set_header A 1;\n proxy_set_header B 2;\n"
                             "  location /a { proxy_set_header C 3; proxy_pass http://x; }\n"
                             "  location /b { proxy_pass http://x; } } }\n")
    assert [[s.args[0] for s in u.level.listed("proxy_set_header")[1]] for u in units] == [["C"], ["A", "B"]]


def test_named_locations_inherit_from_the_server(tmp_path):
    units = _units(tmp_path, "http { server { proxy_read_timeout 5m;\n"
                             "  location / { proxy_read_timeout 1s; error_page 404 = @app; }\n"
                             "  location @app { proxy_pass http://x; } } }\n")
    assert units[0].level.single("proxy_read_timeout").args == ["5m"]
    assert units[0].label() == "location @app"


@pytest.mark.parametrize("text, seconds", [
    ("60", 60), ("60s", 60), ("1m", 60), ("1m30s", 90), ("500ms", 0.5), ("1h", 3600), ("2d", 172800),
    ("x", None), ("10q", None), ("", None), ("$var", None),
])
def test_parse_time_follows_nginx_units(text, seconds):
    assert parse_time(text) == seconds


def test_stmt_text_quotes_empty_and_spaced_arguments():
    assert Stmt("proxy_set_header", ["Connection", ""], "x", 1).text() == 'proxy_set_header Connection "";'
    assert Stmt("add_header", ["X", "a b"], "x", 1).text() == 'add_header X "a b";'


# ----------------------------------------------------------------------------- the command


def test_cli_text_output_names_file_line_and_fix(cli):
    result = cli("nginx", str(FIXTURES / "rules" / "ngx001_hit_default.conf"))
    assert result.returncode == 1
    assert "ngx001_hit_default.conf:8:9: NGX001" in result.stdout
    assert "fix: add `proxy_buffering off;`" in result.stdout
    assert "Traceback" not in result.stderr


def test_cli_clean_config_exits_0(cli):
    result = cli("nginx", str(FIXTURES / "rules" / "ngx006_near_miss.conf"))
    assert result.returncode == 0, result.stdout
    assert "All checks passed in 1 file." in result.stdout


def test_cli_json_schema(cli):
    result = cli("nginx", str(FIXTURES / "rules" / "ngx002_hit.conf"), "--format", "json")
    data = json.loads(result.stdout)
    assert set(data) >= {"findings", "errors", "summary"}
    first = data["findings"][0]
    assert {"rule", "severity", "path", "line", "column", "message", "fix", "location"} <= set(first)
    assert data["summary"]["by_rule"] == {"NGX001": 1, "NGX002": 1}


def test_cli_sarif_and_github(cli):
    sarif = json.loads(cli("nginx", str(FIXTURES / "rules" / "ngx005_hit.conf"), "--format", "sarif").stdout)
    run = sarif["runs"][0]
    assert [r["ruleId"] for r in run["results"]] == ["NGX001", "NGX005", "NGX005"]
    assert [r["level"] for r in run["results"]] == ["warning", "error", "note"]
    assert {r["id"] for r in run["tool"]["driver"]["rules"]} == {f"NGX00{n}" for n in range(1, 8)}
    github = cli("nginx", str(FIXTURES / "rules" / "ngx005_hit.conf"), "--format", "github").stdout
    assert github.splitlines()[1].startswith("::error file=") and ",line=13," in github


def test_cli_reads_a_dump_from_stdin(cli):
    dump = (FIXTURES / "dump" / "nginx-T.txt").read_text()
    result = cli("nginx", "-", "--format", "json", input=dump)
    assert result.returncode == 1
    paths = {f["path"] for f in json.loads(result.stdout)["findings"]}
    assert paths == {"/etc/nginx/conf.d/10-api.conf", "/etc/nginx/conf.d/20-web.conf"}


def test_cli_reads_a_plain_config_from_stdin(cli, tmp_path):
    (tmp_path / "sse.conf").write_text("proxy_buffering off;\nproxy_read_timeout 1h;\n")
    text = "http { server { location / { include sse.conf; proxy_pass http://x; } } }\n"
    result = cli("nginx", "-", cwd=tmp_path, input=text)
    assert result.returncode == 0, result.stdout


def test_cli_empty_stdin_or_empty_file_is_an_input_error(cli, tmp_path):
    result = cli("nginx", "-", input="")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "<stdin>: error: nothing on stdin" in result.stdout
    (tmp_path / "empty.conf").write_text("\n  \n")
    hit = str(FIXTURES / "rules" / "ngx002_hit.conf")
    result = cli("nginx", "empty.conf", hit, "--format", "json", cwd=tmp_path)
    assert result.returncode == 2
    data = json.loads(result.stdout)
    assert data["errors"] == [{"path": "empty.conf", "line": None,
                               "reason": "the file is empty: nothing to check (is this the config nginx loads?)"}]
    assert data["findings"]  # the other input is still checked


def test_cli_a_folder_without_configs_is_an_input_error(cli, tmp_path):
    (tmp_path / "sites").mkdir()
    (tmp_path / "sites" / "README.txt").write_text("configs live elsewhere\n")
    result = cli("nginx", "sites", cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "sites: error: no nginx.conf and no *.conf file in this folder: nothing to check" in result.stdout


def test_cli_stdin_that_is_not_utf8_is_still_checked():
    config = b"http { server { location / { proxy_pass http://x; add_header X caf\xe9; } } }\n"
    proc = subprocess.run([llmdoctor_executable(), "nginx", "-", "--format", "json"], input=config,
                          capture_output=True, timeout=60, check=False, env={**os.environ, "NO_COLOR": "1"})
    assert b"Traceback" not in proc.stderr
    assert proc.returncode == 1
    assert {f["rule"] for f in json.loads(proc.stdout)["findings"]} == {"NGX001", "NGX003"}


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes")
def test_cli_reads_a_pipe_once_like_process_substitution(cli, tmp_path):
    # `llmdoctor nginx <(ssh host nginx -T)` passes a pipe: it was read to sniff for a dump, then re-opened for
    # parsing and found empty ("All checks passed")
    import threading

    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    config = "http {\n  server {\n    location /v1/ {\n      proxy_pass http://app;\n    }\n  }\n}\n"

    def write() -> None:
        with open(pipe, "w") as handle:
            handle.write(config)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    result = cli("nginx", str(pipe), "--format", "json", timeout=60)
    writer.join(5)
    assert result.returncode == 1, result
    assert [(f["rule"], f["line"]) for f in json.loads(result.stdout)["findings"]] == [("NGX001", 3), ("NGX003", 3)]


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_an_endless_device_is_read_up_to_a_bound(monkeypatch):
    from llmdoctor.nginx import check as check_module

    monkeypatch.setattr(check_module, "MAX_STREAM", 4096)
    report = check(["/dev/zero"])
    assert [(e.path, e.reason) for e in report.errors] == [("/dev/zero", "holds more than 4 KiB: too large for an nginx config or dump")]


def test_cli_location_narrows_the_streamed_locations(cli):
    path = str(FIXTURES / "rules" / "ngx001_hit_if_and_named.conf")
    result = cli("nginx", path, "--location", "^/beta/", "--format", "json")
    assert [f["line"] for f in json.loads(result.stdout)["findings"]] == [16]


@pytest.mark.parametrize("args, message", [
    (["--location", "("], "--location '(' is not a valid regular expression"),
    (["--location", "^/nope"], "--location '^/nope' matches none of the proxied locations: location /v1/chat"),
    (["--nginx-version", "new"], "--nginx-version 'new' is not a version"),
    (["--format", "xml"], "--format 'xml': choose one of text, concise, grouped, json, sarif, github, gitlab"),
])
def test_cli_bad_options_exit_2_with_a_message(cli, args, message):
    result = cli("nginx", str(FIXTURES / "rules" / "ngx001_hit_default.conf"), *args)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_cli_without_a_path_exits_2(cli):
    result = cli("nginx")
    assert result.returncode == 2
    assert "missing argument" in result.stderr and "Traceback" not in result.stderr


def test_cli_missing_file_exits_2(cli, tmp_path):
    result = cli("nginx", str(tmp_path / "nope.conf"))
    assert result.returncode == 2
    assert "nope.conf: error: no such file or directory" in result.stdout
    assert "Traceback" not in result.stderr + result.stdout


def test_cli_syntax_error_exits_2_and_other_inputs_are_still_reported(cli):
    result = cli("nginx", str(FIXTURES / "malformed" / "unbalanced.conf"),
                 str(FIXTURES / "rules" / "ngx002_hit.conf"), "--format", "json")
    assert result.returncode == 2
    data = json.loads(result.stdout)
    assert [f["rule"] for f in data["findings"]] == ["NGX002", "NGX001"]
    assert data["errors"][0]["line"] == 8
    assert data["errors"][0]["path"].endswith("unbalanced.conf")


def test_cli_undecodable_bytes_do_not_crash(cli, tmp_path):
    (tmp_path / "nginx.conf").write_bytes(b"http { server { location / { proxy_pass http://x; \xff\xfe } } }\n")
    result = cli("nginx", str(tmp_path / "nginx.conf"))
    assert result.returncode in (1, 2)
    assert "Traceback" not in result.stderr


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads files whatever their mode")
def test_cli_unreadable_included_file_exits_2_with_the_include_line(cli, tmp_path):
    (tmp_path / "secret.conf").write_text("proxy_buffering off;\n")
    (tmp_path / "secret.conf").chmod(0)
    (tmp_path / "nginx.conf").write_text("http {\n  include secret.conf;\n}\n")
    result = cli("nginx", str(tmp_path / "nginx.conf"))
    assert result.returncode == 2
    assert "nginx.conf:2: error: include secret.conf: cannot read: Permission denied: " in result.stdout


def test_conf_dir_resolves_includes_of_a_site_file_like_nginx_s_prefix(cli, tmp_path):
    (tmp_path / "sites-enabled").mkdir()
    (tmp_path / "snippets").mkdir()
    (tmp_path / "snippets" / "sse.conf").write_text("proxy_buffering off;\nproxy_read_timeout 1h;\n")
    site = tmp_path / "sites-enabled" / "app.conf"
    site.write_text("server {\n  location / {\n    include snippets/sse.conf;\n    proxy_pass http://x;\n  }\n}\n")
    alone = cli("nginx", str(site))
    assert alone.returncode == 2
    assert "app.conf:3: error: include snippets/sse.conf: file not found" in alone.stdout
    assert "see --conf-dir" in alone.stdout
    assert cli("nginx", str(site), "--conf-dir", str(tmp_path)).returncode == 0
    assert cli("nginx", "-", "--conf-dir", str(tmp_path), input=site.read_text()).returncode == 0
    bad = cli("nginx", str(site), "--conf-dir", str(tmp_path / "nope"))
    assert bad.returncode == 2 and "--conf-dir" in bad.stderr and "is not a directory" in bad.stderr


def test_nginx_help_documents_the_exit_codes(cli):
    r = cli("nginx", "--help")
    assert r.returncode == 0
    text = " ".join(r.stdout.split())
    assert "Exit 0" in text and "; 1 " in text and "; 2 " in text


# ----------------------------------------------------------------------------- a folder tree, as nginx reads it


def test_a_folder_tree_reads_each_main_config_with_its_own_prefix():
    tree = check([str(FIXTURES)])
    includes = FIXTURES / "includes"
    alone = check([str(includes)])
    under = display_path(includes) + os.sep
    assert {f for f in found(tree) if f[1].startswith(under)} == found(alone) == expected_marks(
        *sorted(includes.rglob("*.conf")))
    reasons = sorted((e.path, e.reason.split(":")[0]) for e in tree.errors)
    malformed = display_path(FIXTURES / "malformed")
    assert reasons == [
        (f"{malformed}/broken_include/broken.conf", "syntax error"),
        (f"{malformed}/cycle/b.conf", "include cycle"),
        (f"{malformed}/missing_include/nginx.conf", "include conf.d/nope.conf"),  # the one real missing file
        (f"{malformed}/stray_brace.conf", "syntax error"),
        (f"{malformed}/unbalanced.conf", "syntax error"),
    ]
    for rule_file in RULE_FIXTURES:  # complete configs (events + http): each its own main config
        shown = display_path(rule_file)
        assert {f for f in found(tree) if f[1] == shown} == expected_marks(rule_file)


def test_a_file_in_the_folder_of_an_nginx_conf_that_it_does_not_include_is_noted_not_checked(tmp_path):
    site = tmp_path / "site"
    (site / "conf.d").mkdir(parents=True)
    (site / "nginx.conf").write_text("events {}\nhttp {\n  proxy_buffering off;\n  proxy_read_timeout 1h;\n"
                                     "  include conf.d/*.conf;\n}\n")
    (site / "conf.d" / "api.conf").write_text("server {\n  location / {\n    proxy_pass http://app;\n  }\n}\n")
    (site / "old.conf").write_text("server {\n  location / {\n    proxy_pass http://app;\n  }\n}\n")
    report = check([str(tmp_path)])
    assert report.errors == [] and report.findings == []  # api.conf inherits buffering off and 1h
    assert report.notices == [f"{display_path(site / 'old.conf')}: not included by "
                              f"{display_path(site / 'nginx.conf')}, so nginx does not read it: not checked"]


def test_cli_on_the_fixture_tree_reports_only_the_real_problems(cli):
    result = cli("nginx", str(FIXTURES), "--format", "json")
    assert result.returncode == 2
    data = json.loads(result.stdout)
    assert len(data["errors"]) == 5 and not any("file not found: " + str(FIXTURES / "snippets") in e["reason"]
                                                 for e in data["errors"])
    includes = [f for f in data["findings"] if "/includes/" in f["path"]]
    assert sorted((f["rule"], f["line"]) for f in includes) == [("NGX001", 10), ("NGX003", 5), ("NGX007", 7)]
