"""Start a real nginx (Debian's nginx-light) on a free loopback port, in its own prefix, always stopped.

    with running_nginx(tmp_path, LOCATION_BODY, upstream_port=port) as proxy:
        url = proxy.url("/stream")

The config is generated: one server on 127.0.0.1:<free port>, `upstream` pointing at the test server,
every path (pid, logs, temp dirs) under `tmp_path`, `daemon off` + `master_process off`, so the single
process started here is the whole server and is killed in `finally`.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

NGINX_CANDIDATES = ("/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx")


def nginx_binary() -> str | None:
    found = shutil.which("nginx")
    if found:
        return found
    return next((c for c in NGINX_CANDIDATES if os.access(c, os.X_OK)), None)


def require_nginx() -> str:
    binary = nginx_binary()
    if binary is None:
        pytest.skip("nginx is not installed (./scripts/test.sh installs Debian's nginx-light)")
    return binary


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def prefix_directives(prefix: Path) -> str:
    """Main-context and http-context lines that keep every file nginx writes under `prefix`."""
    for sub in ("logs", "temp/body", "temp/proxy", "temp/fastcgi", "temp/uwsgi", "temp/scgi", "cache"):
        (prefix / sub).mkdir(parents=True, exist_ok=True)
    return f"pid {prefix}/logs/nginx.pid;\nerror_log {prefix}/logs/error.log info;\n"


def http_prefix_directives(prefix: Path) -> str:
    return (
        f"access_log off;\n"
        f"client_body_temp_path {prefix}/temp/body;\n"
        f"proxy_temp_path {prefix}/temp/proxy;\n"
        f"fastcgi_temp_path {prefix}/temp/fastcgi;\n"
        f"uwsgi_temp_path {prefix}/temp/uwsgi;\n"
        f"scgi_temp_path {prefix}/temp/scgi;\n"
    )


def nginx_conf(prefix: Path, port: int, upstream_port: int, location_body: str, http_extra: str = "") -> str:
    """A complete config: one server, `location /` with `location_body`, upstream `app` = the test server."""
    return (
        "daemon off;\nmaster_process off;\n" + prefix_directives(prefix)
        + "events { worker_connections 64; }\n"
        + "http {\n" + http_prefix_directives(prefix) + http_extra + "\n"
        + f"    upstream app {{ server 127.0.0.1:{upstream_port}; }}\n"
        + f"    server {{\n        listen 127.0.0.1:{port};\n"
        + f"        location / {{\n{location_body}\n        }}\n    }}\n}}\n"
    )


def sandboxed_copy(conf: Path, prefix: Path) -> Path:
    """A copy of `conf`'s folder under `prefix`, its main file writing only under `prefix`.

    nginx -t still creates the pid file and opens the access log and temp paths, by default in /run and
    /var: the copy gets `access_log off` and temp paths under `prefix`, appended to its `http {` line so that
    every line number stays what it is in the original.
    """
    copy_dir = prefix / "conf"
    shutil.copytree(conf.parent, copy_dir, dirs_exist_ok=True)
    main = copy_dir / conf.name
    lines = main.read_text().splitlines(keepends=True)
    for index, line in enumerate(lines):
        if re.match(r"\s*http\s*\{\s*(#.*)?$", line):
            lines[index] = line.rstrip("\n").split("#")[0] + " " + http_prefix_directives(prefix).replace("\n", " ") + "\n"
            break
    main.write_text("".join(lines))
    return main


def _nginx_check(binary: str, flag: str, conf: Path, prefix: Path) -> subprocess.CompletedProcess:
    prefix_directives(prefix)
    return subprocess.run(
        [binary, flag, "-p", str(prefix), "-c", str(conf), "-e", str(prefix / "logs" / "error.log"),
         "-g", f"pid {prefix}/logs/nginx.pid;"],
        check=False, capture_output=True, text=True, timeout=30,
    )


def nginx_test(binary: str, conf: Path, prefix: Path) -> subprocess.CompletedProcess:
    """`nginx -t` on a config (already sandboxed: see sandboxed_copy), with pid and logs under `prefix`."""
    return _nginx_check(binary, "-t", conf, prefix)


def nginx_dump(binary: str, conf: Path, prefix: Path) -> str:
    """`nginx -T`: the configuration dump nginx itself prints (stdout)."""
    proc = _nginx_check(binary, "-T", conf, prefix)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@dataclass
class RunningNginx:
    port: int
    prefix: Path
    conf: Path

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def error_log(self) -> str:
        log = self.prefix / "logs" / "error.log"
        return log.read_text(errors="replace") if log.exists() else ""


def _wait_listening(port: int, proc: subprocess.Popen, deadline: float) -> bool:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return True
        except OSError:
            time.sleep(0.05)
    return False


@contextmanager
def running_nginx(tmp_path: Path, location_body: str, *, upstream_port: int, http_extra: str = "",
                  start_timeout: float = 10.0) -> Iterator[RunningNginx]:
    binary = require_nginx()
    prefix = tmp_path / "nginx"
    prefix.mkdir(parents=True, exist_ok=True)
    port = free_port()
    conf = prefix / "nginx.conf"
    conf.write_text(nginx_conf(prefix, port, upstream_port, location_body, http_extra))
    proc = subprocess.Popen(
        [binary, "-p", str(prefix), "-c", str(conf), "-e", str(prefix / "logs" / "error.log")],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    try:
        if not _wait_listening(port, proc, time.monotonic() + start_timeout):
            proc.kill()
            _, err = proc.communicate(timeout=5)
            log = (prefix / "logs" / "error.log")
            pytest.fail(f"nginx did not start: {err.decode(errors='replace')}\n"
                        f"{log.read_text(errors='replace') if log.exists() else ''}\nconfig:\n{conf.read_text()}")
        yield RunningNginx(port, prefix, conf)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        if proc.stderr:
            proc.stderr.close()
