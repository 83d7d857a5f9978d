#!/usr/bin/env bash
# Prepares the C++ client column of the conformance suite: a Python venv holding the PyPI wheel
# `rocketmq==0.4.4`, a ctypes wrapper that bundles Apache's C++ client (librocketmq.so, built for
# manylinux1 x86_64). `cpp_driver.py` runs under this venv's python.
#
#   tests/conformance/setup-cpp.sh [venv dir]     (default: target/conformance/venv under the repo)
#
# Idempotent: when the venv already imports the wrapper and loads the library, it does nothing.
# The wheel is tagged py2.py3 and calls the library only through ctypes, so any CPython 3 works
# (checked on 3.11). Set PYTHON to choose the interpreter (default python3).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VENV=${1:-$ROOT/target/conformance/venv}
PY=${PYTHON:-python3}
PIN=rocketmq==0.4.4

# Importing `rocketmq.client` loads librocketmq.so (ffi.py dlopens it at import time), so this
# checks the library and its bundled libz, not just that the package files exist.
check() {
  [ -x "$VENV/bin/python" ] &&
    "$VENV/bin/python" - <<'EOF' 2>/dev/null
import importlib.metadata as md
assert md.version("rocketmq") == "0.4.4"
import rocketmq.client  # noqa: F401  (dlopens librocketmq.so)
EOF
}

if check; then
  echo "setup-cpp: $VENV already has $PIN"
  exit 0
fi

mkdir -p "$(dirname "$VENV")"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
# A wheel already downloaded may be offered with PIP_FIND_LINKS (e.g. a wheels directory);
# otherwise pip fetches it from PyPI.
"$VENV/bin/python" -m pip install --disable-pip-version-check --quiet "$PIN"

if ! check; then
  echo "setup-cpp: $PIN installed in $VENV but rocketmq.client does not import (librocketmq.so not loadable?)" >&2
  "$VENV/bin/python" -c 'import rocketmq.client' >&2 || true
  exit 1
fi
echo "setup-cpp: $VENV ready ($PIN, $("$VENV/bin/python" -V 2>&1))"
