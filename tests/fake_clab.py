"""A fake `containerlab` executable for tests on machines without Docker: it records every
call and does, with namespaces on this machine, what containerlab would do with containers.

Formats follow srl-labs/containerlab @39ff2b7:
* flags: `deploy -t FILE`, `destroy -t FILE --cleanup`, `inspect -t FILE --format json`,
  `stop|start -t FILE --node NODE`, `tools netem set -t FILE -n CONTAINER -i IFACE [...]`
  (cmd/deploy.go, destroy.go, inspect.go, stop.go, start.go, tools_netem.go);
* `inspect --format json`: `{"<lab>": [ContainerDetails...]}` sorted by name, `{}` when no
  container exists (cmd/inspect.go printContainerInspectJSON, types/types.go ContainerDetails);
* container names `clab-<lab>-<node>`, labels `containerlab`, `clab-node-name`,
  `clab-node-kind`, `clab-topo-file` (constants/labels.go); the lab directory `clab-<lab>`
  next to the topology file, removed by `destroy --cleanup`.

The management network is created through the Docker Engine at `DOCKER_HOST` (reused by name,
refused by Docker when its subnet overlaps another network's) and removed by `destroy`.
A "container" here is a network namespace `<lab>.<node>` with a `sleep` process in it (its
pid is the container's pid) and the topology's links as veth pairs named by their endpoints.
`stop` sets the node's interfaces down where containerlab parks them in another namespace;
`start` sets them up with the per-interface sysctls back at their defaults (containerlab
moves them into the container again), the ECMP hash policy at a new namespace's (0), and
counts a new boot of the container.
A docker-sonic-vs container gets its ports and forwarding as tests/fake_vs.py describes.
State and the call log live in `$FAKE_CLAB_STATE` (state.json, calls.jsonl), which the fake
Docker engine (tests/fake_docker.py) reads.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests import fake_vs

DEFAULT_SUBNET = "172.20.20.0/24"
"""Containerlab's management subnet when the topology names none (docs/manual/network.md)."""


def _dir() -> Path:
    return Path(os.environ["FAKE_CLAB_STATE"])


def load_state() -> dict[str, Any]:
    """The containers the fake has created, by container name."""
    path = _dir() / "state.json"
    data: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    return data


def _save(state: dict[str, Any]) -> None:
    (_dir() / "state.json").write_text(json.dumps(state, indent=1))


def calls() -> list[list[str]]:
    """Every argv the fake was called with, in order."""
    path = _dir() / "calls.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def _ip(*argv: str) -> None:
    subprocess.run(["ip", *argv], check=True, capture_output=True)


def _option(argv: list[str], *names: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg in names and i + 1 < len(argv):
            return argv[i + 1]
    return None


def _topology(argv: list[str]) -> tuple[Path, dict[str, Any]]:
    path = Path(_option(argv, "-t", "--topo") or "").resolve()
    return path, yaml.safe_load(path.read_text())


def _deploy(argv: list[str]) -> int:
    path, topo = _topology(argv)
    lab, state = topo["name"], load_state()
    kinds = topo["topology"].get("kinds", {})
    (path.parent / f"clab-{lab}").mkdir(exist_ok=True)
    refused = _network(topo)
    if refused:
        print(f"Error: failed to create docker network: {refused}", file=sys.stderr)
        return 1
    subnet = topo.get("mgmt", {}).get("ipv4-subnet", DEFAULT_SUBNET)
    base, prefixlen = subnet.split("/")
    octets = base.split(".")
    for number, (node, spec) in enumerate(topo["topology"]["nodes"].items(), start=2):
        netns = f"{lab}.{node}"
        _ip("netns", "add", netns)
        _ip("-n", netns, "link", "set", "lo", "up")
        sleeper = subprocess.Popen(
            ["ip", "netns", "exec", netns, "sleep", "infinity"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        name = f"clab-{lab}-{node}"
        kind = spec["kind"]
        binds = {}
        for bind in spec.get("binds", []):
            source, target = bind.split(":")[:2]
            binds[target] = str((path.parent / source).resolve())
        state[name] = {
            "id": hashlib.sha256(name.encode()).hexdigest(),
            "name": name,
            "lab": lab,
            "node": node,
            "kind": kind,
            "group": spec.get("group", ""),
            "image": spec.get("image") or kinds.get(kind, {}).get("image", ""),
            "env": spec.get("env", {}),
            "binds": binds,
            "pid": sleeper.pid,
            "netns": netns,
            "state": "running",
            "topo": str(path),
            "root": str(_dir() / name),
            "boot": 1,
            "ipv4": f"{octets[0]}.{octets[1]}.{int(octets[2]) + number // 256}."
            f"{number % 256}/{prefixlen}",
        }
    for link in topo["topology"].get("links", []):
        (a, a_if), (b, b_if) = (end.split(":") for end in link["endpoints"])
        _ip(
            "link", "add", "name", a_if, "netns", f"{lab}.{a}", "mtu", str(link.get("mtu", 9500)),
            "type", "veth", "peer", "name", b_if, "netns", f"{lab}.{b}",
            "mtu", str(link.get("mtu", 9500)),
        )  # fmt: skip
        _ip("-n", f"{lab}.{a}", "link", "set", a_if, "up")
        _ip("-n", f"{lab}.{b}", "link", "set", b_if, "up")
    for box in state.values():
        if box["lab"] == lab and box["kind"] == "sonic-vs":
            fake_vs.start_sh(box)  # containerlab's post-deploy runs supervisord
            fake_vs.bring_up_ports(box["netns"], fake_vs.config(box))
    _save(state)
    print(f"deployed {len(topo['topology']['nodes'])} nodes")
    return 0


def _docker() -> Any:
    import docker

    return docker.DockerClient(base_url=os.environ["DOCKER_HOST"])


def _network(topo: dict[str, Any]) -> str | None:
    """Create the management network through Docker, or reuse it by name (containerlab
    core/network.go); Docker's error when it refuses."""
    from docker.errors import APIError, NotFound
    from docker.types import IPAMConfig, IPAMPool

    mgmt = topo.get("mgmt", {})
    name, subnet = mgmt.get("network", "clab"), mgmt.get("ipv4-subnet", DEFAULT_SUBNET)
    engine = _docker()
    try:
        engine.networks.get(name)
        return None
    except NotFound:
        pass
    try:
        engine.networks.create(
            name, driver="bridge", ipam=IPAMConfig(pool_configs=[IPAMPool(subnet=subnet)])
        )
    except APIError as exc:
        return str(exc.explanation)
    return None


def _sysctl(netns: str, key: str, value: str) -> None:
    subprocess.run(["ip", "netns", "exec", netns, "sysctl", "-qw", f"{key}={value}"], check=True)


def _of_lab(lab: str) -> dict[str, Any]:
    return {k: v for k, v in load_state().items() if v["lab"] == lab}


def _destroy(argv: list[str]) -> int:
    path, topo = _topology(argv)
    state = load_state()
    for name, box in _of_lab(topo["name"]).items():
        try:
            os.kill(box["pid"], signal.SIGKILL)
            os.waitpid(box["pid"], 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        subprocess.run(["ip", "netns", "del", box["netns"]], capture_output=True, check=False)
        del state[name]
    _save(state)
    from docker.errors import DockerException

    # Docker may be gone already when a test's teardown cleans up after a failure.
    with contextlib.suppress(DockerException, KeyError):
        _docker().networks.get(topo.get("mgmt", {}).get("network", "clab")).remove()
    if "--cleanup" in argv or "-c" in argv:
        shutil.rmtree(path.parent / f"clab-{topo['name']}", ignore_errors=True)
    return 0


def _inspect(argv: list[str]) -> int:
    path, topo = _topology(argv)
    boxes = sorted(_of_lab(topo["name"]).values(), key=lambda b: b["name"])
    records = [
        {
            "lab_name": b["lab"],
            "labPath": path.name,
            "absLabPath": str(path),
            "name": b["name"],
            "container_id": b["id"][:12],
            "image": b["image"],
            "kind": b["kind"],
            "group": b["group"],
            "state": b["state"],
            "status": "Up 1 minute" if b["state"] == "running" else "Exited (0) 1 second ago",
            "ipv4_address": b["ipv4"],
            "ipv6_address": "N/A",
            "owner": "root",
        }
        for b in boxes
    ]
    print(json.dumps({topo["name"]: records} if records else {}, indent=2))
    return 0


def _lifecycle(argv: list[str], up: bool) -> int:
    _, topo = _topology(argv)
    state = load_state()
    for node in (_option(argv, "--node", "-n") or "").split(","):
        box = state[f"clab-{topo['name']}-{node}"]
        for link in topo["topology"].get("links", []):
            for end in link["endpoints"]:
                if end.split(":")[0] == node:
                    eth = end.split(":")[1]
                    _ip("-n", box["netns"], "link", "set", eth, "up" if up else "down")
                    if up:  # moved back into the container: its sysctls are the defaults
                        _sysctl(box["netns"], f"net.ipv4.conf.{eth}.arp_ignore", "0")
        if up:  # a restarted container's new namespace hashes ECMP on addresses
            _sysctl(box["netns"], "net.ipv4.fib_multipath_hash_policy", "0")
        box["state"] = "running" if up else "exited"
        box["boot"] += int(up)
    _save(state)
    return 0


def install(where: Path) -> Path:
    """Make `where/containerlab` run this fake (with this Python); the folder, for PATH."""
    where.mkdir()
    script = where / "containerlab"
    script.write_text(
        f"#!{sys.executable}\nimport sys\n"
        f"sys.path.insert(0, {str(Path(__file__).parent.parent)!r})\n"
        "from tests import fake_clab\nsys.exit(fake_clab.main(sys.argv[1:]))\n"
    )
    script.chmod(0o755)
    return where


def main(argv: list[str]) -> int:
    """Record the call, then act like containerlab."""
    with open(_dir() / "calls.jsonl", "a") as log:
        log.write(json.dumps(argv) + "\n")
    verb = argv[0] if argv else ""
    if verb == "deploy":
        return _deploy(argv)
    if verb == "destroy":
        return _destroy(argv)
    if verb == "inspect":
        return _inspect(argv)
    if verb in ("stop", "start"):
        return _lifecycle(argv, verb == "start")
    if argv[:3] == ["tools", "netem", "set"]:
        return 0
    print(f'Error: unknown command {verb!r} for "containerlab"', file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
