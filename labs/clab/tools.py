"""The two tools the clab backend drives: the `containerlab` CLI and the Docker Engine.

`containerlab` runs by subprocess with an argv list (never a shell string); its
`inspect --format json` answer is a map from lab name to container records (containerlab
cmd/inspect.go, types.ContainerDetails: `lab_name`, `name`, `container_id`, `kind`, `state`,
`ipv4_address`, ...). Docker is reached through the Docker SDK (`docker` package), at
`DOCKER_HOST` or the default socket. Each missing piece is one line naming it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from labs import cmdlog
from twin.errors import LabError
from twin.lab.directory import Lab

if TYPE_CHECKING:
    import docker
    from docker.models.containers import Container

CONTAINERLAB = "containerlab"
TOPOLOGY = "topology.clab.yml"
PREFIX = "clab"
"""Containerlab names a node's container `clab-<lab>-<node>` (topology `prefix` unset)."""


def container_name(lab: str, node: str) -> str:
    """The container of a node."""
    return f"{PREFIX}-{lab}-{node}"


def binary() -> str:
    """Path of the containerlab executable, or one line saying it is missing."""
    path = shutil.which(CONTAINERLAB)
    if path is None:
        raise LabError(
            "containerlab is not installed (no containerlab on PATH; see docs/containerlab.md)"
        )
    return path


def topology(lab: Lab) -> Path:
    """The lab's topology file, or one line saying why there is none."""
    path = lab.path / TOPOLOGY
    if not path.is_file():
        raise LabError(f"{path}: missing (run twin generate)")
    return path


def run(argv: list[str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run `containerlab ARGV...`; one line with its last error line when it fails."""
    done = cmdlog.run([binary(), *argv], timeout=timeout)
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        raise LabError(f"containerlab {' '.join(argv[:1])} failed: {lines[-1] if lines else ''}")
    return done


@dataclass(frozen=True)
class Record:
    """One container of a deployed lab, as `containerlab inspect` lists it."""

    node: str
    name: str
    container_id: str
    kind: str
    state: str
    mgmt_ipv4: str


def inspect(lab: Lab) -> list[Record]:
    """The lab's containers (none when it is not deployed)."""
    done = run(["inspect", "-t", str(topology(lab)), "--format", "json"])
    data: dict[str, list[dict[str, Any]]] = json.loads(done.stdout or "{}")
    prefix = f"{PREFIX}-{lab.name}-"
    return [
        Record(
            r["name"].removeprefix(prefix),
            r["name"],
            r.get("container_id", ""),
            r.get("kind", ""),
            r.get("state", ""),
            r.get("ipv4_address", ""),
        )
        for r in data.get(lab.name, [])
    ]


def client() -> docker.DockerClient:
    """A Docker client that has answered a ping, or one line saying there is no daemon."""
    try:
        import docker
        from docker.errors import DockerException
    except ImportError:
        raise LabError(
            "the Docker SDK is not installed (pip install docker; scripts/setup.sh does)"
        ) from None

    where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    try:
        engine = docker.DockerClient(base_url=where, timeout=60)
        engine.ping()
    except DockerException as exc:
        raise LabError(f"no Docker daemon at {where} ({str(exc).splitlines()[0][:120]})") from None
    return engine


def check_image(engine: docker.DockerClient, image: str) -> None:
    """One line when an image is not loaded (nothing is pulled or created)."""
    from docker.errors import ImageNotFound

    try:
        engine.images.get(image)
    except ImageNotFound:
        raise LabError(
            f"image {image} is not loaded in Docker (docker load -i docker-sonic-vs.gz, or "
            f"docker pull; see docs/containerlab.md)"
        ) from None


def subnets(engine: docker.DockerClient, own: str) -> list[str]:
    """The IPv4 subnets of Docker's networks other than `own` (the lab's, left by a deploy
    before): a new management network must overlap none of them."""
    found = []
    for net in engine.networks.list():
        if net.name == own:
            continue
        for pool in (net.attrs.get("IPAM") or {}).get("Config") or []:
            if "." in pool.get("Subnet", ""):
                found.append(pool["Subnet"])
    return found


def container(engine: docker.DockerClient, lab: Lab, node: str) -> Container:
    """A node's container, or one line saying it does not exist."""
    from docker.errors import NotFound

    try:
        return engine.containers.get(container_name(lab.name, node))
    except NotFound:
        raise LabError(f"lab {lab.name}: no container for {node}") from None


def exec_in(
    engine: docker.DockerClient, lab: Lab, node: str, argv: list[str]
) -> subprocess.CompletedProcess[str]:
    """Run a command in a node's container (an argv list, never through a shell)."""
    started = time.monotonic()
    result = container(engine, lab, node).exec_run(argv, demux=True)
    out, err = result.output if isinstance(result.output, tuple) else (result.output, None)
    code = int(result.exit_code or 0)
    cmdlog.ended(["docker", "exec", container_name(lab.name, node), *argv], code, started)
    return subprocess.CompletedProcess(argv, code, _text(out), _text(err))


def _text(data: object) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else ""


def start_detached(engine: docker.DockerClient, lab: Lab, node: str, argv: list[str]) -> None:
    """Start a long-running command in a node's container and return at once."""
    started = time.monotonic()
    container(engine, lab, node).exec_run(argv, detach=True)
    cmdlog.detached(["docker", "exec", "-d", container_name(lab.name, node), *argv], started)


def pid(engine: docker.DockerClient, lab: Lab, node: str) -> int:
    """The host pid of a node's container (its network namespace is /proc/<pid>/ns/net)."""
    box = container(engine, lab, node)
    box.reload()
    number = int(box.attrs["State"]["Pid"])
    if number <= 0:
        raise LabError(f"lab {lab.name}: {node} is not running")
    return number
