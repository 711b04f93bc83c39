#!/usr/bin/env bash
# The whole test suite, from a fresh machine: system services, a virtualenv, the package (a plain,
# non-editable install, as users get it) with its test extras, then pytest. Extra args go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

# The proxy tests run the real servers, Debian's packages (bookworm: nginx 1.22, HAProxy 2.6, Caddy 2.6.2,
# Apache 2.4): each one missing is installed. Their packages start a service on :80/:443; the tests start
# their own on free loopback ports, so the services are stopped (or never started: policy-rc.d in images).
missing=()
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx-light)
command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || missing+=(haproxy)
command -v caddy >/dev/null 2>&1 || [ -x /usr/bin/caddy ] || missing+=(caddy)
command -v apache2 >/dev/null 2>&1 || [ -x /usr/sbin/apache2 ] || missing+=(apache2)
if [ ${#missing[@]} -gt 0 ]; then
    echo "== installing Debian's ${missing[*]} (the proxy tests run the real servers)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if command -v service >/dev/null 2>&1; then
    for name in nginx haproxy caddy apache2; do service "$name" stop >/dev/null 2>&1 || true; done
fi

VENV="${LLMDOCTOR_VENV:-.venv}"
if [ ! -x "$VENV/bin/python" ]; then
    echo "== creating $VENV"
    python3 -m venv "$VENV"
fi
echo "== installing llmdoctor[test] into $VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
"$VENV/bin/python" -m pip install -q --force-reinstall --no-deps . >/dev/null
"$VENV/bin/python" -m pip install -q ".[test]"

echo "== pytest"
exec "$VENV/bin/python" -m pytest "$@"
