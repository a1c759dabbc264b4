"""The promises every backend keeps, through the one lifecycle around its verbs
(`labs.lifecycle.Managed`): each test runs on every registered backend (tests/contract/
conftest.py says where each runs here).

- A deploy of a lab that fails the cross-check of its files (two servers on one address) is
  refused in one line, exit 2, before the backend is called or anything is created.
- A deploy records the twin (state file, run directory with its owner) and logs one
  `deployed` event of the one schema; a second deploy of the running lab is refused.
- Destroy, exec and fault from a copy of the lab directory (the same lab name, never
  deployed) leave the running twin intact: refused naming both directories where a twin
  holds the lab's name on the machine or cluster (netns, clab, Clabernetes); a fake or sim
  twin is its directory's own, and the copy has none.
- Destroy removes everything: what the backend made, the state file, the run directory.
- `twin cleanup` reaches the backend a deploy recorded (by the lab's name where the name is
  claimed, else by its directory) through `Backend.cleanup`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from labs import events, lifecycle, registry, state
from tests.conftest import leftovers, twin_cli
from tests.contract.conftest import BACKENDS, Env
from twin.cli import main as cli
from twin.lab.directory import Lab

DEPLOYED = {"t", "event", "backend", "nodes", "sessions", "converged_s", "details"}
"""The keys of the `deployed` event, on every backend."""


def test_every_registered_backend_is_in_the_contract() -> None:
    names = [getattr(p, "values", [p])[0] for p in BACKENDS]  # a name, or pytest.param(name)
    assert sorted(names) == sorted(registry.BACKENDS)


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run the CLI in this process: it must refuse with one line and exit 2; the line."""
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


def _same_server_address(lab: Path) -> None:
    """server2 given server1's address (each file valid alone; labcheck cross-checks)."""
    first = json.loads((lab / "configs" / "server1" / "host.json").read_text())["address"]
    host = lab / "configs" / "server2" / "host.json"
    host.write_text(json.dumps({**json.loads(host.read_text()), "address": first}))


def _nothing_of(env: Env) -> None:
    """Nothing of the lab is left: on the machine, in the backend's tools, in its directory."""
    assert leftovers(env.name) == [] and env.kept() == []
    assert not lifecycle.run_dir(env.name).exists()
    assert not (env.path / "state.json").exists()


def test_a_lab_failing_labcheck_is_refused_before_anything(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    _same_server_address(env.path)
    err = _refused(["deploy", str(env.path), "--backend", env.backend], capsys)
    assert "server2/host.json: address: " in err
    _nothing_of(env)
    assert env.calls() == [] and not (env.path / events.EVENTS_FILE).exists()


def test_deploy_once_owner_only_destroy_everything(
    env: Env, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = shutil.copytree(env.path, tmp_path / "copy" / env.path.name)
    done = twin_cli("deploy", str(env.path), "--backend", env.backend)
    try:
        assert done.returncode == 0, done.stderr
        lab, twin = Lab.open(env.path), registry.get(env.backend)
        assert twin.running(lab)
        recorded = state.load(env.path)
        assert recorded is not None and (recorded.backend, recorded.status) == (
            env.backend,
            "running",
        )
        owner = lifecycle.owner(env.name)
        if twin.backend.claims_name:
            assert owner is not None and owner.backend == env.backend
            assert owner.lab_dir == str(env.path.resolve())
        else:
            assert owner is None  # only records in its lab directory
        logged = [e for e in events.read(env.path) if e["event"] == "deployed"]
        assert len(logged) == 1 and set(logged[0]) == DEPLOYED
        assert (logged[0]["backend"], logged[0]["nodes"]) == (env.backend, len(lab.graph))
        before = (leftovers(env.name), env.kept())

        err = _refused(["deploy", str(env.path), "--backend", env.backend], capsys)
        assert f"lab {env.name} is already running" in err
        here, there = str(env.path.resolve()), str(copy.resolve())
        on = ["--backend", env.backend]
        for argv in (
            ["exec", str(copy), *on, "leaf1", "--", "true"],
            ["fault", str(copy), *on, "link-down", "leaf1:spine1"],
            ["destroy", str(copy), *on],
        ):
            if twin.backend.claims_name:
                err = _refused(argv, capsys)
                assert here in err and there in err and "--force-owner" in err, err
            elif argv[0] != "destroy":
                assert f"lab {env.name} is not running (twin deploy {copy})" in _refused(
                    argv, capsys
                )
            else:  # the copy's own twin, which it has not
                assert cli.main(argv) == 0 and "removed 0 twins" in capsys.readouterr().out
        assert twin.running(lab) and (leftovers(env.name), env.kept()) == before
        assert [e["event"] for e in events.read(env.path)] == ["deployed"]
    finally:
        gone = twin_cli("destroy", str(env.path))
    assert gone.returncode == 0, gone.stderr
    _nothing_of(env)
    destroyed = events.read(env.path)[-1]
    assert (destroyed["event"], destroyed["backend"]) == ("destroyed", env.backend)


def test_cleanup_goes_through_the_backend_its_deploy_recorded(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    state.State(env.name, env.backend).save(env.path)  # a deploy killed part-way
    target = str(env.path)
    if registry.get(env.backend).backend.claims_name:
        lifecycle.claim(env.name, env.path, env.backend)
        record = lifecycle.run_dir(env.name) / lifecycle.OWNER
        dead = {**json.loads(record.read_text()), "pid": 1, "start": 0}  # its process is gone
        record.write_text(json.dumps(dead))
        assert lifecycle.status(env.name) == "left over"
        target = env.name
    assert cli.main(["cleanup", target]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{env.name}: removed ") and out.endswith(f"({env.backend})\n"), out
    _nothing_of(env)
