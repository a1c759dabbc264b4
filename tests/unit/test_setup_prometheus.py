"""scripts/prometheus-off.sh: the packaged prometheus service is stopped whenever it is on."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "prometheus-off.sh"


def fake_systemctl(tmp_path: Path, enabled: str, active: str) -> Path:
    """A systemctl that answers is-enabled/is-active as given and logs every call."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls"
    tool = bin_dir / "systemctl"
    tool.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> {log}\n'
        f'case "$1" in is-enabled) echo {enabled}; [ {enabled} = enabled ];;\n'
        f"  is-active) echo {active}; [ {active} = active ];; esac\n"
    )
    tool.chmod(0o755)
    return bin_dir


@pytest.mark.parametrize(
    ("enabled", "active", "stopped"),
    [
        ("enabled", "active", True),
        ("enabled", "inactive", True),
        ("disabled", "active", True),
        ("disabled", "inactive", False),
    ],
)
def test_the_service_is_stopped_only_when_it_is_on(
    tmp_path: Path, enabled: str, active: str, stopped: bool
) -> None:
    bin_dir = fake_systemctl(tmp_path, enabled, active)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    out = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, check=True)
    calls = (tmp_path / "calls").read_text().splitlines()
    assert ("disable --now prometheus" in calls) is stopped
    assert ("stopped and disabled" in out.stdout) is stopped


def test_without_systemd_nothing_is_done(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    out = subprocess.run(
        ["/bin/bash", str(SCRIPT)],
        env={"PATH": str(empty)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout == ""
