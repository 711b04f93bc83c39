"""Start real HAProxy, Caddy and Apache httpd (Debian's packages) on free loopback ports, always stopped.

    with running_haproxy(tmp_path, config_text) as proxy:    # config_text holds the whole haproxy.cfg
        ...
    with running_caddy(tmp_path, caddyfile_text, ports) as proxy:
    with running_apache(tmp_path, body_text, ports) as proxy:  # body: Listen/VirtualHost lines; modules loaded

Each runs in the foreground (haproxy -db, caddy run, apache2 -DFOREGROUND) as one process group started
here, with every file it writes under `tmp_path`, and is killed in `finally`. `wait_listening` polls each
given port. `probe_all` probes several URLs at once (threads: each probe is I/O bound and runs its own
event loop), so a test module pays for its slowest probe, not their sum.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

APACHE_MODULES = ("mpm_event", "authz_core", "proxy", "proxy_http", "headers", "setenvif", "env", "filter",
                  "deflate", "cache", "cache_disk", "buffer", "substitute")
APACHE_MODULE_DIR = "/usr/lib/apache2/modules"


def binary(name: str, *candidates: str) -> str:
    found = shutil.which(name) or next((c for c in candidates if os.access(c, os.X_OK)), None)
    if found is None:
        pytest.skip(f"{name} is not installed (./scripts/test.sh installs Debian's package)")
    return found


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def free_ports(count: int) -> list[int]:
    """`count` distinct free ports: bound together, so the kernel cannot hand out one twice (one at a time, a
    port released by the first bind may come back for the second: caddy's "ambiguous site definition")."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def wait_listening(ports: list[int], proc: subprocess.Popen, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    pending = list(ports)
    while pending and time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", pending[0]), timeout=0.2):
                pending.pop(0)
        except OSError:
            time.sleep(0.03)
    return not pending


@dataclass
class RunningProxy:
    ports: list[int]
    prefix: Path
    config: Path
    log: Path

    def url(self, index: int = 0, path: str = "/v1/chat/completions") -> str:
        return f"http://127.0.0.1:{self.ports[index]}{path}"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


@contextmanager
def _run(argv: list[str], ports: list[int], prefix: Path, config: Path, log: Path,
         env: dict | None = None) -> Iterator[RunningProxy]:
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        if not wait_listening(ports, proc):
            _stop(proc)
            pytest.fail(f"{argv[0]} did not start:\n{log.read_text(errors='replace')}\nconfig:\n{config.read_text()}")
        yield RunningProxy(ports, prefix, config, log)
    finally:
        _stop(proc)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)


@contextmanager
def running_haproxy(tmp_path: Path, config_text: str, ports: list[int]) -> Iterator[RunningProxy]:
    haproxy = binary("haproxy", "/usr/sbin/haproxy")
    prefix = tmp_path / "haproxy"
    prefix.mkdir(parents=True, exist_ok=True)
    config = prefix / "haproxy.cfg"
    config.write_text(config_text)
    with _run([haproxy, "-db", "-f", str(config)], ports, prefix, config, prefix / "haproxy.log") as proxy:
        yield proxy


@contextmanager
def running_caddy(tmp_path: Path, caddyfile: str, ports: list[int]) -> Iterator[RunningProxy]:
    caddy = binary("caddy", "/usr/bin/caddy")
    prefix = tmp_path / "caddy"
    prefix.mkdir(parents=True, exist_ok=True)
    config = prefix / "Caddyfile"
    config.write_text(caddyfile)
    env = {**os.environ, "HOME": str(prefix), "XDG_DATA_HOME": str(prefix), "XDG_CONFIG_HOME": str(prefix)}
    with _run([caddy, "run", "--config", str(config), "--adapter", "caddyfile"], ports, prefix, config,
              prefix / "caddy.log", env) as proxy:
        yield proxy


def caddy_global(extra: str = "") -> str:
    """Global options for a test Caddy: no admin endpoint, no automatic HTTPS."""
    return "{\n\tadmin off\n\tauto_https off\n" + extra + "}\n"


@contextmanager
def running_apache(tmp_path: Path, body: str, ports: list[int]) -> Iterator[RunningProxy]:
    """`CACHEROOT` in `body` becomes a folder the unprivileged worker (User nobody, when run as root) can
    write: outside pytest's private tmp tree, removed afterwards."""
    import tempfile

    apache = binary("apache2", "/usr/sbin/apache2")
    prefix = tmp_path / "apache"
    (prefix / "logs").mkdir(parents=True, exist_ok=True)
    cache_root = Path(tempfile.mkdtemp(prefix="llmdoctor-apache-cache-"))
    os.chmod(cache_root, 0o777)
    loads = "\n".join(f"LoadModule {m}_module {APACHE_MODULE_DIR}/mod_{m}.so" for m in APACHE_MODULES)
    user = "User nobody\nGroup nogroup\n" if os.geteuid() == 0 else ""
    config = prefix / "httpd.conf"
    config.write_text(
        f"ServerRoot {prefix}\n{loads}\n{user}PidFile {prefix}/logs/httpd.pid\nErrorLog {prefix}/logs/error.log\n"
        f"LogLevel warn\nMutex file:{prefix}/logs\nDefaultRuntimeDir {prefix}/logs\nServerName 127.0.0.1\n"
        + body.replace("CACHEROOT", str(cache_root)))
    for folder in re.findall(r"CacheRoot (\S+)", config.read_text()):
        os.makedirs(folder, mode=0o777, exist_ok=True)
        os.chmod(folder, 0o777)
    try:
        with _run([apache, "-DFOREGROUND", "-f", str(config)], ports, prefix, config,
                  prefix / "logs" / "error.log") as proxy:
            yield proxy
    finally:
        shutil.rmtree(cache_root, ignore_errors=True)


def probe_all(urls: dict[str, str], *, timeout: float = 15.0, expect_done: bool = False, trials: int = 1) -> dict:
    """{name: ProbeResult} for every URL, probed concurrently."""
    from llmdoctor.probe import run_probe

    with ThreadPoolExecutor(max_workers=max(1, len(urls))) as pool:
        futures = {name: pool.submit(run_probe, url, timeout=timeout, expect_done=expect_done, trials=trials)
                   for name, url in urls.items()}
        return {name: future.result() for name, future in futures.items()}
