"""A fake Docker Engine API on a unix socket, for tests on machines without Docker.

It answers the endpoints the Docker SDK (`docker` 7.x, API version 1.45) calls for what the
clab backend does, in the Engine API's formats (docs.docker.com/reference/api/engine/v1.45):
`GET /_ping`, `GET /version`, `GET /images/{name}/json` (404 `{"message": "No such image"}`),
`GET /networks`, `GET /networks/{id}`, `POST /networks/create` (403 when the subnet overlaps
another network's, as Docker's IPAM refuses it; the default `bridge` 172.17.0.0/16 exists),
`DELETE /networks/{id}`, `GET /containers/json`, `GET /containers/{id}/json` (`Id`, `Name`,
`State.Pid`, `Config`), `POST /containers/{id}/exec` (201 `{"Id"}`), `POST /exec/{id}/start`
(detached: 200; attached: 101 upgrade, then the multiplexed stream: 8-byte headers `[stream,
0, 0, 0, size (big-endian u32)]`, stream 1 stdout, 2 stderr), `GET /exec/{id}/json`
(`ExitCode`). Every request is recorded.

Containers are those tests/fake_clab.py deployed (its state file). Commands run in a
docker-sonic-vs container are answered as the image would, from what the topology bound into
it and from the real state of its interfaces: `redis-cli ping`, `supervisorctl status|start|
signal`, `supervisord` (start.sh's config steps, tests/fake_vs.py), `sonic-cfggen -d -v
DEVICE_METADATA.localhost.hostname` (from the config start.sh loaded), `vtysh -c 'show
daemons'`, `/usr/lib/frr/bfdd -d ...` (detached; attached, the exec never ends: bfdd keeps its
pipes open), `vtysh -f FILE` (FILE must be bound; the first push after each boot waits for
the config lock that bgpcfgd's own start-up push holds, as FRR 10.5's vtysh does, or forever
in a container named in `Engine.stuck`), `timeout -k K N CMD` (coreutils: 124 when CMD does
not end in N s), `ip link set dev PORT carrier off|on`
(the port's kernel carrier, tests/fake_vs.py), `vtysh -c 'show bgp summary json'` (FRR's
JSON: a peer is Established when both ends' configs were pushed, both bgpds run, and the
ports between them are up), `ip -j route show` (the container's kernel routes, which
tests/fake_vs.py keeps what the switch's FRR would install; it also gives the switches ports
that forward frames).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import secrets
import socketserver
import struct
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pytest

from tests import fake_clab, fake_vs

API = "1.45"
IMAGES = frozenset({"docker-sonic-vs:latest", "ghcr.io/hellt/network-multitool:latest"})
"""The images a lab's topology names, loaded by default."""
FRR_DAEMONS = ("mgmtd", "zebra", "bgpd", "watchfrr", "staticd")
"""What `vtysh -c 'show daemons'` lists in the image (bfdd once started)."""
WAITING = "% Can't enter config; candidate datastore locked by another session\n"
"""What FRR 10.5's `vtysh -f` prints on each try (every 0.1 s) while bgpcfgd's start-up push
holds FRR's configuration lock: it waits for the lock itself (vtysh/vtysh_config.c
`vtysh_read_file`, lib/vty.c `vty_config_enter`, frr-10.5.4)."""
TRIES = 5
"""How many tries vtysh makes before bgpcfgd releases the lock after a boot."""
HELD_S = 600.0
"""How long an exec that never ends holds its connection (the SDK times out first)."""
UPGRADE_PAUSE = 0.15
"""Seconds between the 101 headers and the stream: the SDK reads the stream from the raw
socket once http.client has parsed the headers, so bytes that arrived with them are lost."""


class Engine:
    """State of the fake engine: images loaded, execs created, requests seen."""

    def __init__(self, images: set[str]) -> None:
        self.images = images
        self.execs: dict[str, dict[str, Any]] = {}
        self.requests: list[tuple[str, str, Any]] = []
        self.pushed: set[str] = set()  # containers whose frr.conf vtysh loaded
        self.stopped: dict[str, set[str]] = {}  # container -> daemons not running
        self.carrier_off: dict[str, set[str]] = {}  # container -> ports told `carrier off`
        self.networks: dict[str, dict[str, Any]] = {}  # name -> network, as inspect shows it
        self.lock = threading.RLock()
        self.raced: dict[str, int] = {}  # container -> the boot whose bgpcfgd took the lock
        self.stuck: set[str] = set()  # containers whose bgpcfgd never releases the lock
        self.bfdd: set[str] = set()  # containers whose bfdd was started (detached)
        self.held: list[str] = []  # containers whose attached exec never ended
        self.add_network("bridge", "172.17.0.0/16")  # the daemon's default bridge

    def add_network(self, name: str, subnet: str) -> str | None:
        """Create a network as `POST /networks/create` does; why not when it cannot (a name
        taken, or a subnet overlapping another network's: Docker's IPAM refuses it)."""
        if name in self.networks:
            return f"network with name {name} already exists"
        new = ipaddress.IPv4Network(subnet)
        for net in self.networks.values():
            for pool in net["IPAM"]["Config"]:
                if new.overlaps(ipaddress.IPv4Network(pool["Subnet"])):
                    return (
                        "invalid pool request: Pool overlaps with other one on this address space"
                    )
        self.networks[name] = {
            "Name": name,
            "Id": secrets.token_hex(32),
            "Driver": "bridge",
            "IPAM": {"Driver": "default", "Config": [{"Subnet": subnet}]},
        }
        return None

    def network(self, ref: str) -> dict[str, Any] | None:
        """A network by name or id."""
        return next((n for n in self.networks.values() if ref in (n["Name"], n["Id"])), None)

    def alive(self, name: str) -> bool:
        """Whether a switch container's bgpd runs with its frr.conf pushed."""
        with self.lock:
            return name in self.pushed and "bgpd" not in self.stopped.get(name, set())

    def off(self, name: str) -> frozenset[str]:
        """The ports of a switch container whose kernel carrier was turned off."""
        with self.lock:
            return frozenset(self.carrier_off.get(name, set()))

    def executed(self) -> list[tuple[str, list[str]]]:
        """(container name, argv) of every exec started, in order."""
        return [(e["container"], e["argv"]) for e in self.execs.values() if e.get("started")]


def _box(ref: str) -> dict[str, Any] | None:
    for box in fake_clab.load_state().values():
        if ref in (box["name"], box["id"], box["id"][:12]):
            result: dict[str, Any] = box
            return result
    return None


def _inspect(box: dict[str, Any]) -> dict[str, Any]:
    running = box["state"] == "running"
    return {
        "Id": box["id"],
        "Name": f"/{box['name']}",
        "Image": "sha256:" + box["id"],
        "State": {
            "Status": box["state"],
            "Running": running,
            "Pid": box["pid"] if running else 0,
        },
        "Config": {
            "Image": box["image"],
            "Env": [f"{k}={v}" for k, v in box["env"].items()],
            "Labels": {
                "containerlab": box["lab"],
                "clab-node-name": box["node"],
                "clab-node-kind": box["kind"],
                "clab-topo-file": box["topo"],
            },
        },
        "HostConfig": {"Binds": [f"{s}:{t}:ro" for t, s in box["binds"].items()]},
    }


# --------------------------------------------------------------------------- the image
def _bgp_summary(engine: Engine, box: dict[str, Any]) -> str:
    """FRR's JSON: a peer is Established when bgpd runs with its frr.conf pushed on both
    ends and both ports toward each other are up."""
    db = fake_vs.config(box)
    up = fake_vs.ports_up(db, fake_vs.operstate(box["netns"]), engine.off(box["name"]))
    peers = {}
    for peer, desc in fake_vs.neighbours(box).items():
        other = _box(f"clab-{box['lab']}-{desc}")
        port = next(
            (n for n, a in fake_vs.addresses(db) if ipaddress.IPv4Address(peer) in a.network),
            None,
        )
        established = (
            engine.alive(box["name"])
            and other is not None
            and engine.alive(other["name"])
            and port is not None
            and up.get(port, False)
        )
        peers[peer] = {
            "remoteAs": 65000,
            "state": "Established" if established else "Active",
            "peerUptimeMsec": 1000 if established else 0,
            "pfxRcd": 1 if established else 0,
            "desc": desc,
        }
    return json.dumps({"ipv4Unicast": {"peers": peers, "peerCount": len(peers)}})


def _routes(box: dict[str, Any]) -> str:
    """The container's kernel routes, as `ip -j route show` prints them (tests/fake_vs.py
    keeps them what FRR would install)."""
    done = subprocess.run(
        ["ip", "-n", box["netns"], "-j", "route", "show"], capture_output=True, text=True
    )
    return done.stdout


def answer(engine: Engine, box: dict[str, Any], argv: list[str]) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of a command run in a container."""
    name = box["name"]
    stopped = engine.stopped.setdefault(name, set())
    if box["kind"] != "sonic-vs":
        return 0, "", ""
    if argv == ["redis-cli", "ping"]:
        return 0, "PONG\n", ""
    if argv[:2] == ["supervisorctl", "status"]:
        daemon = argv[2]
        if daemon in stopped:
            return 3, f"{daemon:<33}EXITED    Dec 03 09:00 AM\n", ""
        return 0, f"{daemon:<33}RUNNING   pid 42, uptime 0:01:00\n", ""
    if argv[:2] == ["supervisorctl", "start"]:
        stopped.discard(argv[2])
        return 0, f"{argv[2]}: started\n", ""
    if argv[:3] == ["supervisorctl", "signal", "KILL"]:
        stopped.add(argv[3])
        return 0, f"{argv[3]}: signalled\n", ""
    if argv == ["sonic-cfggen", "-d", "-v", "DEVICE_METADATA.localhost.hostname"]:
        return (
            0,
            fake_vs.config(box).get("DEVICE_METADATA", {}).get("localhost", {}).get("hostname", "")
            + "\n",
            "",
        )
    if argv[:1] == ["/usr/lib/frr/bfdd"]:
        engine.bfdd.add(name)
        return 0, "", ""
    if argv == ["supervisord"]:
        fake_vs.start_sh(box)
        return 0, "", ""
    if argv == ["vtysh", "-c", "show daemons"]:
        running = [d for d in FRR_DAEMONS if d not in stopped]
        return 0, " " + " ".join(running + ["bfdd"] * (name in engine.bfdd)) + "\n", ""
    if argv[:2] == ["timeout", "-k"] and len(argv) > 4:
        if argv[4:6] == ["vtysh", "-f"] and name in engine.stuck:  # vtysh waits on: killed
            return 124, WAITING * 10 * int(argv[3]), ""
        return answer(engine, box, argv[4:])
    if argv[:2] == ["vtysh", "-f"]:
        if argv[2] not in box["binds"]:
            return 1, "", f"vtysh: Can't open configuration file {argv[2]}\n"
        waited = ""
        if engine.raced.get(name) != box["boot"]:  # bgpcfgd's start-up push holds the lock
            engine.raced[name] = box["boot"]
            waited = WAITING * TRIES
        engine.pushed.add(name)
        return 0, waited, ""
    if argv == ["vtysh", "-c", "show bgp summary json"]:
        return 0, _bgp_summary(engine, box), ""
    if argv[:4] == ["ip", "link", "set", "dev"] and argv[5:6] == ["carrier"]:
        if argv[4] not in fake_vs.config(box).get("PORT", {}):
            return 1, "", f'Cannot find device "{argv[4]}"\n'
        off = engine.carrier_off.setdefault(name, set())
        (off.add if argv[6] == "off" else off.discard)(argv[4])
        return 0, "", ""
    if argv == ["ip", "-j", "route", "show"]:
        return 0, _routes(box), ""
    message = f'OCI runtime exec failed: exec: "{argv[0]}": executable file not found in $PATH'
    return 127, "", message + "\n"


# --------------------------------------------------------------------------- HTTP
class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        return json.loads(raw) if raw else None

    def _send(self, status: int, data: Any, kind: str = "application/json") -> None:
        payload = (data if isinstance(data, str) else json.dumps(data)).encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Api-Version", API)
        self.end_headers()
        self.wfile.write(payload)

    def _path(self) -> tuple[str, dict[str, list[str]]]:
        url = urlparse(self.path)
        path = re.sub(r"^/v[0-9.]+", "", url.path)
        from urllib.parse import parse_qs

        return unquote(path), parse_qs(url.query)

    def do_GET(self) -> None:
        """Ping, version, images, containers, exec inspect."""
        engine = self.server.engine
        path, query = self._path()
        engine.requests.append(("GET", path, query))
        if path == "/_ping":
            self._send(200, "OK", "text/plain")
        elif path == "/version":
            self._send(200, {"ApiVersion": API, "Version": "27.0.3", "Os": "linux"})
        elif m := re.fullmatch(r"/images/(.+)/json", path):
            if m[1] in engine.images:
                self._send(200, {"Id": "sha256:" + secrets.token_hex(32), "RepoTags": [m[1]]})
            else:
                self._send(404, {"message": f"No such image: {m[1]}"})
        elif path == "/containers/json":
            boxes = fake_clab.load_state().values()
            self._send(200, [{"Id": b["id"], "Names": [f"/{b['name']}"]} for b in boxes])
        elif m := re.fullmatch(r"/containers/([^/]+)/json", path):
            box = _box(m[1])
            if box is None:
                self._send(404, {"message": f"No such container: {m[1]}"})
            else:
                self._send(200, _inspect(box))
        elif path == "/networks":
            self._send(200, list(engine.networks.values()))
        elif m := re.fullmatch(r"/networks/([^/]+)", path):
            net = engine.network(m[1])
            self._send(200, net) if net else self._send(404, {"message": "network not found"})
        elif m := re.fullmatch(r"/exec/([^/]+)/json", path):
            done = engine.execs[m[1]]
            self._send(200, {"ID": m[1], "Running": False, "ExitCode": done.get("exit", 0)})
        else:
            self._send(404, {"message": f"page not found: {path}"})

    def do_POST(self) -> None:
        """Exec create and start."""
        engine = self.server.engine
        path, _ = self._path()
        body = self._body()
        engine.requests.append(("POST", path, body))
        if m := re.fullmatch(r"/containers/([^/]+)/exec", path):
            box = _box(m[1])
            if box is None or box["state"] != "running":
                self._send(409, {"message": f"container {m[1]} is not running"})
                return
            exec_id = secrets.token_hex(32)
            engine.execs[exec_id] = {"container": box["name"], "argv": body["Cmd"]}
            self._send(201, {"Id": exec_id})
        elif m := re.fullmatch(r"/exec/([^/]+)/start", path):
            self._start(engine, m[1], body or {})
        elif path == "/networks/create":
            pools = (body.get("IPAM") or {}).get("Config") or [{"Subnet": "172.18.0.0/16"}]
            with engine.lock:
                refused = engine.add_network(body["Name"], pools[0]["Subnet"])
            if refused:
                self._send(409 if "already exists" in refused else 403, {"message": refused})
            else:
                self._send(201, {"Id": engine.networks[body["Name"]]["Id"], "Warning": ""})
        else:
            self._send(404, {"message": f"page not found: {path}"})

    def do_DELETE(self) -> None:
        """Network removal."""
        engine = self.server.engine
        path, _ = self._path()
        engine.requests.append(("DELETE", path, None))
        m = re.fullmatch(r"/networks/([^/]+)", path)
        net = engine.network(m[1]) if m else None
        if net is None:
            self._send(404, {"message": f"network {path} not found"})
            return
        with engine.lock:
            del engine.networks[net["Name"]]
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _start(self, engine: Engine, exec_id: str, body: dict[str, Any]) -> None:
        job = engine.execs[exec_id]
        job["started"] = True
        box = _box(job["container"])
        assert box is not None
        if job["argv"][:2] == ["/usr/lib/frr/bfdd", "-d"] and not body.get("Detach"):
            # The daemonised bfdd keeps the exec's stdout open (FRR >= 9): it never ends.
            engine.held.append(box["name"])
            time.sleep(HELD_S)
            self.close_connection = True
            return
        with engine.lock:
            job["exit"], out, err = answer(engine, box, job["argv"])
        if body.get("Detach"):
            self._send(200, "", "text/plain")
            return
        self.send_response(101)
        self.send_header("Content-Type", "application/vnd.docker.raw-stream")
        self.send_header("Connection", "Upgrade")
        self.send_header("Upgrade", "tcp")
        self.end_headers()
        self.wfile.flush()
        time.sleep(UPGRADE_PAUSE)
        for stream, text in ((1, out), (2, err)):
            data = text.encode()
            if data:
                self.wfile.write(struct.pack(">BxxxL", stream, len(data)) + data)
        self.wfile.flush()
        self.close_connection = True


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    request_queue_size = 128  # a scenario's threads connect at once (dockerd listens wider)
    engine: Engine
    routing: fake_vs.Routing

    def shutdown(self) -> None:
        """Stop serving and stop the switches' routing."""
        super().shutdown()
        self.routing.stop()


def serve(socket_path: Path) -> tuple[Engine, _Server]:
    """Start the fake engine on `socket_path` in a thread, with `IMAGES` loaded, and the
    switches' routing (tests/fake_vs.py); (its state, the server to stop)."""
    server = _Server(str(socket_path), _Handler)
    server.engine = Engine(set(IMAGES))
    server.routing = fake_vs.Routing(fake_clab.load_state, server.engine.alive, server.engine.off)
    server.routing.start()
    threading.Thread(target=server.serve_forever, name="fake-docker", daemon=True).start()
    return server.engine, server


@contextlib.contextmanager
def with_containerlab(
    where: Path, monkeypatch: pytest.MonkeyPatch, topology: Path
) -> Iterator[tuple[Path, Engine, _Server]]:
    """The fake containerlab on PATH (its state in `where/fake-state`) and a fake engine at
    DOCKER_HOST while inside: (the fake's state folder, the engine, its server); whatever is
    left deployed of `topology` is destroyed afterwards."""
    state = where / "fake-state"
    state.mkdir()
    monkeypatch.setenv("PATH", f"{fake_clab.install(where / 'bin')}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_CLAB_STATE", str(state))
    socket = where / "docker.sock"
    engine, server = serve(socket)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{socket}")
    try:
        yield state, engine, server
    finally:
        if fake_clab.load_state():
            fake_clab.main(["destroy", "-t", str(topology), "--cleanup"])
        server.shutdown()
        server.server_close()
