#!/usr/bin/env bash
# The whole test suite, from a fresh machine: system services, a virtualenv, the package (a plain,
# non-editable install, as users get it) with its test extras, then pytest. Extra args go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
    echo "== installing Debian's nginx-light (the proxy tests run a real nginx)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq nginx-light >/dev/null
fi
# the Debian package starts a server on :80; the tests start their own on free loopback ports
if command -v service >/dev/null 2>&1; then service nginx stop >/dev/null 2>&1 || true; fi

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
