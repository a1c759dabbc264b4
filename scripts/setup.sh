#!/usr/bin/env bash
# Install everything fabric twin needs on Debian 12, as root: system packages (FRR, iproute2,
# iptables, tcpdump, tcpreplay, libyang, graphviz for `twin graph`, prometheus and promtool for
# the metrics tests) and a virtual environment .venv with the project.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(frr iproute2 iptables nftables tcpdump tcpreplay iputils-ping procps
          libyang2-dev gcc python3-venv python3-dev graphviz prometheus)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
bash scripts/prometheus-off.sh

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[dev]'
# the project's bytecode, which pip writes for an installed package but not an editable one:
# every `twin` command then reads its modules compiled, PYTHONDONTWRITEBYTECODE set or not
# (a module edited later is compiled again as it loads)
.venv/bin/python -m compileall -q twin labs traffic validators >/dev/null
# the simulator's C core built again, guided by a training run (labs/sim/pgo.py, about 40 s)
.venv/bin/python -m labs.sim.pgo
echo "setup: ready (.venv/bin/twin)"
