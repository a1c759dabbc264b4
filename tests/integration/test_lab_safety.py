"""Nothing of another lab, directory or process is touched (issue 21, without a live twin):
the owner of a twin, the lab lock, the claim of the run root, `cleanup` beside its caller,
`generate --force`, the orderly stop on a signal.

Run roots are moved under the test's temporary directory, except where a new process must
share one with this test (the lab lock, `twin cleanup` beside its caller): those use lab
names of their own, and leave nothing.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from labs import events, lifecycle, state
from labs.fake.backend import FakeBackend
from labs.netns import traffic as netns_traffic
from labs.netns.faults import End
from tests.conftest import SHORT, TWIN, lab_name, twin_cli, write_lab
from twin.change import incident
from twin.cli import main as cli
from twin.errors import LabError
from twin.lab import directory as labdir
from twin.lab.directory import Lab
from twin.verdict import verdict

ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (the run root)")


@pytest.fixture
def run_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A run root of this test's own."""
    root = tmp_path / "run" / "twin"
    monkeypatch.setattr(lifecycle, "RUN_ROOT", root)
    return root


def _deploying(tmp_path: Path, folder: str, name: str) -> Path:
    """A lab directory whose deploy is under way in this process (its claimed run
    directory names it), as one being deployed from it looks to other commands."""
    path = write_lab(tmp_path / folder, name)
    state.State(name, "netns").save(path)
    lifecycle.claim(name, path)
    return path


@ROOT
@pytest.mark.parametrize("verb", ["destroy", "deploy", "exec", "inspect"])
def test_a_twin_is_acted_on_only_from_the_directory_that_deployed_it(
    verb: str, run_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = lab_name()
    a = _deploying(tmp_path, "a", name)
    b = write_lab(tmp_path / "b", name)  # the same lab name, never deployed
    argv = [verb, str(b), *(["leaf1", "--", "true"] if verb == "exec" else [])]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert str(a.resolve()) in err and str(b.resolve()) in err
    # A second twin of the name cannot be deployed, forced or not; the others can be forced.
    assert ("twin destroy that directory first" if verb == "deploy" else "--force-owner") in err
    assert (run_root / name / lifecycle.OWNER).is_file() and (a / "state.json").is_file()


@ROOT
def test_cleanup_by_name_of_a_live_twin_needs_its_directory_or_force_owner(
    run_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = lab_name()
    a = _deploying(tmp_path, "a", name)
    assert cli.main(["cleanup", name]) == 2
    assert str(a.resolve()) in capsys.readouterr().err
    assert (run_root / name).is_dir()
    assert cli.main(["cleanup", name, "--force-owner"]) == 0
    assert not (run_root / name).exists() and not (a / "state.json").exists()


@ROOT
def test_a_left_over_twin_of_another_directory_does_not_block(
    run_root: Path, tmp_path: Path
) -> None:
    name = lab_name()
    a = write_lab(tmp_path / "a", name)
    lifecycle.claim(name, a)
    (run_root / name / lifecycle.OWNER).write_text(
        f'{{"lab_dir": "{a.resolve()}", "pid": 1, "start": 0}}'
    )  # its deploy has died, and nothing of it runs
    lifecycle.check_owner(name, tmp_path / "b")


HOLD = """
import sys, time
from pathlib import Path
from labs import lifecycle
with lifecycle.locked(sys.argv[1], "test", Path(sys.argv[2]) if sys.argv[2:] else None):
    print("held", flush=True)
    sys.stdin.read()
"""
"""Holds a lab's lock (its lab directory's, given one) until its input ends."""


def hold(name: str, lab_dir: Path | None = None) -> subprocess.Popen[bytes]:
    """A process holding the lab's lock (`HOLD`), once it says so."""
    where = [str(lab_dir)] if lab_dir else []
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, name, *where], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert holder.stdout and holder.stdout.readline() == b"held\n"
    return holder


@ROOT
@pytest.mark.parametrize("verb", ["deploy", "destroy", "run", "cleanup"])
def test_a_second_command_of_a_busy_lab_is_refused_in_one_line(
    verb: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = lab_name()
    path = write_lab(tmp_path / "lab", name)
    holder = hold(name, path if verb in ("deploy", "run") else None)  # fake: the directory's
    try:
        scenario = tmp_path / "s.yaml"  # the default scenario names servers the small lab lacks
        scenario.write_text("name: s\nsettle: 0\nvalidate: {bgp_health: {}}\n")
        extra = {"deploy": ["--backend", "fake"], "run": [str(scenario), "--backend", "fake"]}
        argv = [verb, str(path), *extra.get(verb, [])]
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"lab {name}" in err and " is busy: " in err, err
        assert not (path / "state.json").exists()
    finally:
        holder.communicate(b"")
    assert not (lifecycle.RUN_ROOT / f"{lifecycle.LOCK}{name}").exists()
    with lifecycle.locked(name, "test"):  # released with its holder
        pass


def test_same_named_copies_on_fake_take_the_lock_of_their_own_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A twin on a backend that claims no name is its lab directory's own: a command on one
    copy of a lab does not make a copy elsewhere busy (it does the copy itself)."""
    name = lab_name()
    a = write_lab(tmp_path / "a", name)
    b = Path(shutil.copytree(a, tmp_path / "b"))
    holder = hold(name, a)
    try:
        assert cli.main(["deploy", str(b), "--backend", "fake"]) == 0
        assert cli.main(["destroy", str(b)]) == 0
        assert cli.main(["deploy", str(a), "--backend", "fake"]) == 2
        assert f"lab {name} ({a}) is busy" in capsys.readouterr().err
    finally:
        holder.communicate(b"")
        cli.main(["destroy", str(b)])


CLAIMS = """
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from labs import lifecycle
from labs.netns import frr
lifecycle.RUN_ROOT = Path(sys.argv[1])
failed = 0
for i in range(int(sys.argv[3])):
    try:
        lifecycle.claim(sys.argv[2], Path("."))
        frr.remove_run_dir(sys.argv[2])
    except OSError:
        failed += 1
print(failed)
"""


def test_labs_claim_the_run_root_at_once_without_a_failure(tmp_path: Path) -> None:
    root = tmp_path / "run" / "twin"
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", CLAIMS, str(root), lab_name("race"), "1500"],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    failed = [int(r.communicate(timeout=300)[0]) for r in racers]
    assert failed == [0, 0]  # 3,000 claims in all
    assert [p.name for p in root.iterdir()] == []


@ROOT
def test_cleanup_never_signals_its_caller(tmp_path: Path) -> None:
    name = lab_name()
    script = f"{TWIN} cleanup {name}; echo exit=$?"
    done = subprocess.run(
        ["sh", "-c", script],
        env={**os.environ, "TWIN_LAB": name},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0 and "exit=0" in done.stdout, (done.stdout, done.stderr)


def _fabric(tmp_path: Path) -> Path:
    return write_lab(tmp_path / "seed", lab_name()) / "fabric.yaml"


@pytest.mark.parametrize("target", [".", "..", "here"])
def test_generate_force_never_replaces_the_working_directory_or_above(
    target: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fabric = _fabric(tmp_path)
    here = tmp_path / "work" / "here"
    here.mkdir(parents=True)
    (here / "keep").write_text("mine")
    monkeypatch.chdir(here)
    out = str(here) if target == "here" else target
    done = twin_cli("generate", str(fabric), "-o", out, "--force", cwd=here)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert (here / "keep").read_text() == "mine"
    assert sorted(p.name for p in here.parent.iterdir()) == ["here"]


def test_generate_force_replaces_only_a_lab_directory(tmp_path: Path) -> None:
    fabric = _fabric(tmp_path)
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "keep").write_text("mine")
    assert cli.main(["generate", str(fabric), "-o", str(plain), "--force"]) == 2
    assert (plain / "keep").read_text() == "mine"
    lab = tmp_path / "lab"
    assert cli.main(["generate", str(fabric), "-o", str(lab)]) == 0
    (lab / "notes.txt").write_text("mine")  # a lab directory with something else in it
    assert cli.main(["generate", str(fabric), "-o", str(lab), "--force"]) == 2
    assert (lab / "notes.txt").read_text() == "mine"
    (lab / "notes.txt").unlink()
    (lab / "runs").mkdir()
    assert cli.main(["generate", str(fabric), "-o", str(lab), "--force"]) == 0
    assert (lab / "fabric.yaml").is_file()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_a_verb_in_one_line(
    sig: signal.Signals,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A run stopped by a signal while it plays: one line, exit 128 + the signal, the run
    directory marked interrupted, the twin it deployed destroyed."""
    lab = write_lab(tmp_path / "lab", lab_name())
    scenario = tmp_path / "short.yaml"
    scenario.write_text(yaml.safe_dump(SHORT))

    def play(*_: Any, **__: Any) -> None:
        os.kill(os.getpid(), sig)
        time.sleep(30)  # the signal ends this
        pytest.fail("the signal did not stop the run")

    monkeypatch.setattr(FakeBackend, "play", play)
    before = signal.getsignal(sig)
    assert cli.main(["run", str(lab), str(scenario), "--backend", "fake"]) == 128 + sig
    err = capsys.readouterr().err
    assert err.splitlines()[-1].startswith(f"twin: stopped by {sig.name}"), err
    assert "Traceback" not in err
    (run,) = (lab / "runs").iterdir()
    assert (run / "interrupted").read_text() == f"interrupted: {sig.name}\n"
    assert not (lab / "state.json").exists()  # the fake twin it deployed is destroyed
    assert signal.getsignal(sig) == before


SWAPPER = """
import os, sys, time
lab, victim, until = sys.argv[1], sys.argv[2], time.time() + float(sys.argv[3])
swaps = 0
while time.time() < until:
    for name in ("events.jsonl", "state.json", "failures.json", "runs", "logs"):
        try:
            path = os.path.join(lab, name)
            if os.path.isdir(path) and not os.path.islink(path):
                os.rename(path, os.path.join(lab, f".{name}.{swaps}"))
            os.symlink(victim if name != "runs" else os.path.dirname(victim), f"{lab}/.swap")
            os.replace(f"{lab}/.swap", path)
            swaps += 1
        except OSError:
            pass
    for pid in os.listdir("/proc"):  # state.json's temporary names too
        if pid.isdigit():
            try:
                os.symlink(victim, f"{lab}/.state.json.{pid}.tmp")
            except OSError:
                pass
print(swaps)
"""


@ROOT
def test_link_swaps_by_another_user_during_runs_never_reach_roots_files(
    shared_tmp: Path, other_user: str
) -> None:
    """A lab directory another user owns: refused as root, unless trusted; trusted, runs go
    on while that user swaps its entries for links to a root-only file, which is never
    written (the runs may end refused, in one line)."""
    tmp_path = shared_tmp
    lab = write_lab(tmp_path / "lab", lab_name())
    subprocess.run(["chown", "-R", other_user, str(lab)], check=True)
    secret = tmp_path / "secret"
    secret.mkdir(mode=0o700)
    victim = secret / "shadow"
    victim.write_text("root only\n")
    victim.chmod(0o600)
    scenario = tmp_path / "short.yaml"
    scenario.write_text(yaml.safe_dump(SHORT))
    run = ["run", str(lab), str(scenario), "--backend", "fake"]
    refused = twin_cli(*run)
    assert refused.returncode == 2 and "--trust-lab-dir" in refused.stderr, refused.stderr
    swapper = subprocess.Popen(
        ["runuser", "-u", other_user, "--", "python3", "-c", SWAPPER, str(lab), str(victim), "60"],
        stdout=subprocess.PIPE,
        text=True,
    )
    codes = []
    try:
        for _ in range(12):
            done = twin_cli(*run, "--trust-lab-dir")
            codes.append(done.returncode)
            assert "Traceback" not in done.stderr, done.stderr
            assert done.returncode in (0, 1) or done.stderr.count("\n") == 1, done.stderr
    finally:
        swapper.kill()
        swaps = swapper.communicate()[0]
    assert victim.read_text() == "root only\n" and victim.stat().st_nlink == 1
    assert sorted(p.name for p in secret.iterdir()) == ["shadow"]
    assert any(code == 2 for code in codes), swaps  # the swaps were met, and refused


def test_a_torn_last_event_line_is_skipped_and_the_run_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lab = write_lab(tmp_path / "lab", lab_name())
    (lab / "events.jsonl").write_text('{"t": 1.0, "event": "deployed"}\n{"t": 2.0, "ev')
    assert [e["event"] for e in events.read(lab)] == ["deployed"]
    scenario = tmp_path / "short.yaml"
    scenario.write_text(yaml.safe_dump(SHORT))
    assert cli.main(["run", str(lab), str(scenario), "--backend", "fake"]) in (0, 1)
    (run,) = (lab / "runs").iterdir()
    assert (run / "report.json").is_file() and "Traceback" not in capsys.readouterr().err


def test_a_fifo_planted_as_the_event_log_is_refused_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lab = write_lab(tmp_path / "lab", lab_name())
    os.mkfifo(lab / "events.jsonl")
    assert cli.main(["deploy", str(lab), "--backend", "fake"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "events.jsonl: not a regular file" in err, err
    assert not (lab / "state.json").exists()


@ROOT
def test_cleanup_of_a_plain_directory_named_like_a_lab_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "mylab").mkdir()
    monkeypatch.chdir(tmp_path)
    assert cli.main(["cleanup", "mylab"]) == 2
    assert "not a lab directory" in capsys.readouterr().err


PLANTER = """
import os, sys
parent, target = sys.argv[1], sys.argv[2]
for name in os.listdir(parent):
    if name.startswith(".") and not os.path.islink(os.path.join(parent, name)):
        os.rename(os.path.join(parent, name), os.path.join(parent, "moved" + name))
        os.symlink(target, os.path.join(parent, name))
"""


def as_user(user: str, script: str, *args: str) -> None:
    """Run a Python script as `user` (a real second local user), to its end."""
    subprocess.run(["runuser", "-u", user, "--", "python3", "-c", script, *args], check=True)


@ROOT
@pytest.mark.parametrize("verb", ["generate", "apply", "incident"])
def test_a_scratch_directory_swapped_by_another_user_is_never_written_through(
    verb: str,
    shared_tmp: Path,
    other_user: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`generate -o`, `apply -o` and `incident` into a directory another user owns: that
    user replaces the scratch directory beside the output by a link to a root-only directory
    just before the files are written; nothing is written there, and the output is whole."""
    base = write_lab(shared_tmp / "base", lab_name())
    theirs = shared_tmp / "theirs"
    theirs.mkdir()
    shutil.chown(theirs, other_user)
    secret = shared_tmp / "secret"
    secret.mkdir(mode=0o700)
    (secret / "shadow").write_text("root only\n")

    def planting(real: Any) -> Any:
        def wrapped(*args: Any) -> Any:
            as_user(other_user, PLANTER, str(theirs), str(secret))
            return real(*args)

        return wrapped

    if verb == "apply":
        monkeypatch.setattr(incident, "_copy_lab", planting(incident._copy_lab))
    else:
        monkeypatch.setattr(labdir, "_write", planting(labdir._write))
    change = shared_tmp / "change.yaml"
    change.write_text(yaml.safe_dump({"configs/leaf1/frr.conf": [{"append": "! changed"}]}))
    argv = {
        "generate": ["generate", str(shared_tmp / "base.yaml"), "-o", str(theirs / "lab")],
        "apply": ["apply", str(base), str(change), "-o", str(theirs / "lab")],
        "incident": ["incident", "pause-storm", str(theirs / "lab")],
    }[verb]
    code = cli.main(argv)
    assert sorted(p.name for p in secret.iterdir()) == ["shadow"]
    assert (secret / "shadow").read_text() == "root only\n"
    assert code == 0, capsys.readouterr().err
    made = theirs / "lab" / ("before" if verb == "incident" else "")
    assert not made.is_symlink() and (made / "configs" / "leaf1" / "frr.conf").is_file()


@ROOT
def test_the_record_of_a_deploy_is_roots_only(run_root: Path, tmp_path: Path) -> None:
    """`.owner` names the lab directory, which only its owner reads: no one else reads it."""
    name = lab_name()
    _deploying(tmp_path, "lab", name)
    assert (run_root / name / lifecycle.OWNER).stat().st_mode & 0o077 == 0


def _pcap_capture(
    monkeypatch: pytest.MonkeyPatch, lab: Path, out: Path, netns: str
) -> list[subprocess.Popen[bytes]]:
    """The captures of `leaf1:spine1` started into `out`, tcpdump listening on the loopback
    of `netns` (no twin deployed)."""
    monkeypatch.setattr(netns_traffic, "netns_name", lambda lab, node: netns)
    lo = (End("leaf1", "lo"), End("spine1", "lo"))
    monkeypatch.setattr(netns_traffic, "resolve_link", lambda *_: lo)
    return netns_traffic.start_captures(Lab.open(lab), ["leaf1:spine1"], out)


@ROOT
def test_a_capture_never_writes_through_a_link_another_user_planted(
    shared_tmp: Path, other_user: str, monkeypatch: pytest.MonkeyPatch, netns: str
) -> None:
    """A run directory another user owns (`--trust-lab-dir`): that user plants a link to a
    root-only file where the capture goes; tcpdump starts, the file is never written; a
    capture where nothing is planted is a pcap."""
    lab = write_lab(shared_tmp / "lab", lab_name())
    run = shared_tmp / "run"
    (run / "capture").mkdir(parents=True)
    subprocess.run(["chown", "-R", other_user, str(run)], check=True)
    victim = shared_tmp / "victim"
    victim.write_text("root only\n")
    victim.chmod(0o600)
    planted = str(run / "capture" / "leaf1_lo.pcap")
    as_user(other_user, "import os, sys; os.symlink(*sys.argv[1:])", str(victim), planted)
    started = []
    try:
        with contextlib.suppress(LabError):
            started = _pcap_capture(monkeypatch, lab, run, netns)
        deadline = time.monotonic() + 10
        while started and victim.read_bytes() == b"root only\n" and time.monotonic() < deadline:
            time.sleep(0.05)  # tcpdump writes its pcap header when it starts
    finally:
        netns_traffic.stop_captures(started)
    assert victim.read_bytes() == b"root only\n" and victim.stat().st_uid == 0
    mine = shared_tmp / "mine"
    started = _pcap_capture(monkeypatch, lab, mine, netns)
    pcap = mine / "capture" / "leaf1_lo.pcap"
    try:
        deadline = time.monotonic() + 10
        while pcap.stat().st_size < 24 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        netns_traffic.stop_captures(started)
    assert pcap.read_bytes()[:4] in (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4")  # pcap magic


@ROOT
def test_a_report_file_is_never_written_through_a_link_another_user_planted(
    shared_tmp: Path,
    other_user: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`twin run --junit` into another user's directory: that user plants a link to a
    root-only file at the report's name after the command checked it, before the report is
    written; the link is replaced, the file left as it was."""
    lab = write_lab(shared_tmp / "lab", lab_name())
    theirs = shared_tmp / "theirs"
    theirs.mkdir()
    shutil.chown(theirs, other_user)
    victim = shared_tmp / "victim"
    victim.write_text("root only\n")
    victim.chmod(0o600)
    junit = theirs / "junit.xml"
    judge = verdict.report_run

    def planted(*args: Any, **kwargs: Any) -> Any:
        link = "import os, sys; os.symlink(*sys.argv[1:])"
        as_user(other_user, link, str(victim), str(junit))
        return judge(*args, **kwargs)

    monkeypatch.setattr(verdict, "report_run", planted)
    scenario = shared_tmp / "short.yaml"
    scenario.write_text(yaml.safe_dump(SHORT))
    code = cli.main(["run", str(lab), str(scenario), "--backend", "fake", "--junit", str(junit)])
    assert victim.read_text() == "root only\n"
    assert code in (0, 1), capsys.readouterr().err
    assert not junit.is_symlink() and junit.read_text().startswith("<?xml")
