"""Active probes between servers: reachability and jumbo frames with DF set, every pair.

Each server runs one shell in its namespace that pings every other server twice: a small
packet (reachability) and one filling the host MTU with DF set (path MTU). A hop whose MTU is
too small answers "Frag needed" and names itself; a NIC whose own MTU is too small fails
locally.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from labs import cmdlog
from labs.netns.plan import netns_name
from labs.processes import lab_env
from twin.labdir import Lab

ICMP_OVERHEAD = 28
FRAG = re.compile(r"From (\S+) .*Frag needed.*mtu = (\d+)")
LOCAL = re.compile(r"local error: message too long, mtu=(\d+)")


def _script(targets: list[str], jumbo: int) -> str:
    lines = []
    for ip in targets:
        lines.append(f"echo '== {ip}'")
        lines.append(f"ping -n -c1 -W0.5 -s 56 {ip} >/dev/null 2>&1; echo small=$?")
        lines.append(f"ping -n -c1 -W0.5 -M do -s {jumbo} {ip} 2>&1; echo jumbo=$?")
    return "\n".join(lines) + "\n"


def parse(src: str, output: str, size: int) -> list[dict[str, Any]]:
    """Probe results from one server's shell output.

    >>> out = "== 10.2.0.9\\nsmall=0\\nFrom 10.1.0.3 icmp_seq=1 Frag needed and DF set "
    >>> out += "(mtu = 1500)\\njumbo=1\\n"
    >>> parse("server1", out, 8972)[0]["frag_from"], parse("server1", out, 8972)[0]["mtu"]
    ('10.1.0.3', 1500)
    """
    results = []
    for block in output.split("== ")[1:]:
        dst, _, body = block.partition("\n")
        small = re.search(r"small=(\d+)", body)
        jumbo = re.search(r"jumbo=(\d+)", body)
        frag, local = FRAG.search(body), LOCAL.search(body)
        results.append(
            {
                "src": src,
                "dst_ip": dst.strip(),
                "reachable": bool(small and small.group(1) == "0"),
                "jumbo_ok": bool(jumbo and jumbo.group(1) == "0"),
                "size": size + ICMP_OVERHEAD,
                "frag_from": frag.group(1) if frag else ("local" if local else None),
                "mtu": int(frag.group(2)) if frag else (int(local.group(1)) if local else None),
            }
        )
    return results


def ping_all(lab: Lab) -> list[dict[str, Any]]:
    """Probe every ordered pair of servers; one result per pair."""
    addresses = {s: lab.host(s)["address"].split("/")[0] for s in lab.nodes("server")}
    names = {ip: s for s, ip in addresses.items()}

    def one(src: str) -> list[dict[str, Any]]:
        jumbo = int(lab.host(src)["mtu"]) - ICMP_OVERHEAD
        targets = [ip for s, ip in addresses.items() if s != src]
        done = cmdlog.run(
            ["ip", "netns", "exec", netns_name(lab.name, src), "sh"],
            stdin=_script(targets, jumbo),
            timeout=30 + 2 * len(targets),
            env=lab_env(lab.name),
        )
        results = parse(src, done.stdout, jumbo)
        for r in results:
            r["dst"] = names.get(r["dst_ip"], r["dst_ip"])
        return results

    with ThreadPoolExecutor(16) as pool:
        return [r for rs in pool.map(one, addresses) for r in rs]
