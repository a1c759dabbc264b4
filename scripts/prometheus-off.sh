#!/usr/bin/env bash
# Keep Debian's packaged prometheus service off: it serves every interface's :9090 without a
# credential, and the tests start their own on 127.0.0.1. Run by setup.sh on every run, so a
# service enabled before (or by an interrupted setup) is found and stopped too.
set -euo pipefail
command -v systemctl >/dev/null || exit 0
state=$(systemctl is-enabled prometheus 2>/dev/null || true)
active=$(systemctl is-active prometheus 2>/dev/null || true)
if [ "$state" = enabled ] || [ "$active" = active ]; then
  systemctl disable --now prometheus >/dev/null 2>&1 || true
  echo "setup: stopped and disabled the prometheus service (it listens on :9090 without a credential)"
fi
