"""A lab's configs are parsed once while unchanged on disk (validators ask for the same
switch's config_db.json thousands of times), and read again as soon as they change, even in
place with the same size within one tick of the file system's clock."""

from __future__ import annotations

import os
import time
from pathlib import Path

from twin.lab.directory import RACY_NS, Lab

MTU = '{"PORT": {"Ethernet0": {"mtu": "%s"}}}'


def config(tmp_path: Path, mtu: str, mtime_ns: int | None = None) -> Path:
    """Write leaf1's config_db.json in place (same inode), with this mtime if given."""
    path = tmp_path / "configs" / "leaf1" / "config_db.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(MTU % mtu)
    if mtime_ns is not None:
        os.utime(path, ns=(mtime_ns, mtime_ns))
    return path


def mtu(lab: Lab) -> str:
    return str(lab.config_db("leaf1")["PORT"]["Ethernet0"]["mtu"])


def test_an_unchanged_config_is_parsed_once_a_changed_one_again(tmp_path: Path) -> None:
    old = time.time_ns() - 10 * RACY_NS
    config(tmp_path, "9100", old)
    lab = Lab(tmp_path)
    first = lab.config_db("leaf1")
    assert lab.config_db("leaf1") is first and mtu(lab) == "9100"
    config(tmp_path, "1500", old + 1000)  # same size and inode, 1 us later
    assert mtu(lab) == "1500" and lab.config_db("leaf1") is not first


def test_a_config_written_within_a_clock_tick_is_read_again(tmp_path: Path) -> None:
    """A change within the same timestamp tick leaves (mtime, size, inode) as they were: a
    file that recent when read is not kept."""
    path = config(tmp_path, "9100")
    lab = Lab(tmp_path)
    tick = path.stat().st_mtime_ns
    assert mtu(lab) == "9100" and lab.configs_stamp() is None
    config(tmp_path, "1500", tick)
    assert mtu(lab) == "1500"


def test_the_configs_stamp_changes_with_any_config(tmp_path: Path) -> None:
    old = time.time_ns() - 10 * RACY_NS
    config(tmp_path, "9100", old)
    (tmp_path / "configs" / "leaf1" / "frr.conf").write_text("hostname leaf1\n")
    os.utime(tmp_path / "configs" / "leaf1" / "frr.conf", ns=(old, old))
    lab = Lab(tmp_path)
    stamp = lab.configs_stamp()
    assert stamp is not None and len(stamp) == 2 and lab.configs_stamp() == stamp
    config(tmp_path, "1500", old + 1000)
    assert lab.configs_stamp() not in (None, stamp)


def test_the_configs_stamp_lists_files_as_os_walk_does(tmp_path: Path) -> None:
    """Every file under configs/ with its version, top down with names sorted, a link to a
    directory listed nowhere and not followed; None while one was just written."""
    old = time.time_ns() - 10 * RACY_NS
    for name in (
        "leaf2/config_db.json",
        "leaf1/frr.conf",
        "leaf1/config_db.json",
        "leaf1/x/y",
        "z",
    ):
        path = tmp_path / "configs" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(name)
        os.utime(path, ns=(old, old))
    (tmp_path / "configs" / "alias").symlink_to(tmp_path / "configs" / "leaf1")
    expected = []
    for here, dirs, files in os.walk(tmp_path / "configs"):
        dirs.sort()
        for name in sorted(files):
            st = os.stat(os.path.join(here, name))
            expected.append((os.path.join(here, name), (st.st_mtime_ns, st.st_size, st.st_ino)))
    stamp = Lab(tmp_path).configs_stamp()
    assert stamp is not None and list(stamp) == expected
    assert [p.removeprefix(str(tmp_path / "configs")) for p, _ in stamp] == [
        "/z",
        "/leaf1/config_db.json",
        "/leaf1/frr.conf",
        "/leaf1/x/y",
        "/leaf2/config_db.json",
    ]
    (tmp_path / "configs" / "leaf1" / "x" / "y").write_text("now")
    assert Lab(tmp_path).configs_stamp() is None


def test_a_folder_kept_listed_is_listed_again_when_an_entry_comes_or_goes(
    tmp_path: Path,
) -> None:
    """Folders listed more than a tick ago are read from the last listing while their own
    version (mtime, size, inode) holds; a file or folder added, removed or renamed there
    changes it (its mtime moved back to another old time too: listed again)."""
    old = time.time_ns() - 10 * RACY_NS

    def aged(*paths: Path, at: int = old) -> None:
        for path in paths:
            os.utime(path, ns=(at, at))

    configs = tmp_path / "configs"
    config(tmp_path, "9100", old)
    aged(configs / "leaf1", configs)
    lab = Lab(tmp_path)

    def names() -> list[str]:
        return [p.removeprefix(str(configs)) for p, _ in lab.configs_stamp() or []]

    assert names() == ["/leaf1/config_db.json"] and names() == ["/leaf1/config_db.json"]
    (configs / "leaf1" / "frr.conf").write_text("hostname leaf1\n")
    aged(configs / "leaf1" / "frr.conf")
    assert names() == ["/leaf1/config_db.json", "/leaf1/frr.conf"]  # the folder's mtime is now
    aged(configs / "leaf1", at=old + 5)
    assert names() == ["/leaf1/config_db.json", "/leaf1/frr.conf"]  # kept again, then:
    (configs / "leaf1" / "frr.conf").rename(configs / "leaf1" / "bgpd.conf")
    aged(configs / "leaf1", at=old + 7)
    assert names() == ["/leaf1/bgpd.conf", "/leaf1/config_db.json"]
    (configs / "leaf2").mkdir()
    (configs / "leaf2" / "config_db.json").write_text("{}")
    aged(configs / "leaf2" / "config_db.json", configs / "leaf2")
    aged(configs, at=old + 11)
    assert names() == ["/leaf1/bgpd.conf", "/leaf1/config_db.json", "/leaf2/config_db.json"]
    (configs / "leaf1" / "bgpd.conf").unlink()
    aged(configs / "leaf1", at=old + 9)
    assert names() == ["/leaf1/config_db.json", "/leaf2/config_db.json"]
