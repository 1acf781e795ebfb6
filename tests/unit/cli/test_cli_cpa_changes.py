"""``msh cpa add | remove | reload``: the agreements folder changed only with a set the server accepts, never an
overwrite, and the running server told by SIGHUP (found by server.pid_file) with its outcome reported."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from msh.cli import main
from msh.runtime.config import load_settings
from msh.runtime.msh import Msh
from msh.runtime.pidfile import write_pid_file
from msh.runtime.serving import serve
from tests.support.agreement_files import DEMO_A_B, demo_bytes, replace_once

CONFIG = Path(__file__).resolve().parents[3] / "samples" / "config" / "party-a.toml"
SECOND = "cpa-demo-a-b-second"
WAIT = 20.0


def second_agreement(cpaid: str = SECOND) -> bytes:
    return replace_once(demo_bytes(), b'tp:cpaid="cpa-demo-a-b"', f'tp:cpaid="{cpaid}"'.encode())


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Party A's settings with a folder of agreements (the demo one), a store and (unset) no pid file."""
    folder = tmp_path / "cpas"
    folder.mkdir()
    shutil.copyfile(DEMO_A_B, folder / "demo-a-b.xml")
    monkeypatch.setenv("MSH_AGREEMENTS_PATHS", str(folder))
    monkeypatch.setenv("MSH_STORE_URL", str(tmp_path / "a.sqlite"))
    monkeypatch.setenv("MSH_SERVER_TLS", "false")
    monkeypatch.setenv("MSH_SERVER_PORT", "0")
    return folder


def cpa(*args: str) -> list[str]:
    return ["cpa", *args, "--config", str(CONFIG)]


# ----------------------------------------------------------------------------------------- no server


def test_add_copies_a_good_agreement_and_says_when_it_takes_effect(
    setup: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    new = tmp_path / "second.xml"
    new.write_bytes(second_agreement())
    assert main(cpa("add", str(new))) == 0
    out = capsys.readouterr().out
    assert f"added {SECOND} as {setup / 'second.xml'}" in out
    assert "no running msh serve found (server.pid_file is not set): the change takes effect at its next start" in out
    assert (setup / "second.xml").read_bytes() == new.read_bytes()
    # Adding the same file again changes nothing and is no error.
    assert main(cpa("add", str(new))) == 0
    assert "is already there, unchanged" in capsys.readouterr().out


def test_add_never_overwrites_a_different_file_nor_a_loaded_cpaid(
    setup: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = setup / "second.xml"
    saved.write_bytes(second_agreement())
    other = tmp_path / "second.xml"
    other.write_bytes(second_agreement("cpa-other"))
    assert main(cpa("add", str(other))) == 2
    err = capsys.readouterr().err
    assert f"{saved} exists and differs from {other}: not overwritten" in err
    assert saved.read_bytes() == second_agreement()
    same_id = tmp_path / "again.xml"
    same_id.write_bytes(second_agreement())
    assert main(cpa("add", str(same_id))) == 2
    assert f"CPAId {SECOND} is already loaded from {saved}" in capsys.readouterr().err
    assert not (setup / "again.xml").exists()


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"<not-a-cpa/>", "broken.xml"),
        (replace_once(second_agreement(), b"<tp:RetryInterval>PT5S<", b"<tp:RetryInterval>-PT5S<"), "is negative"),
    ],
)
def test_an_agreement_that_does_not_load_is_not_added(
    setup: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, said: str
) -> None:
    broken = tmp_path / "broken.xml"
    broken.write_bytes(content)
    assert main(cpa("add", str(broken))) == 1
    out = capsys.readouterr().out
    assert said in out and "not added" in out and "unchanged" in out
    assert sorted(p.name for p in setup.iterdir()) == ["demo-a-b.xml"]


def test_add_needs_a_folder_of_agreements(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    new = tmp_path / "second.xml"
    new.write_bytes(second_agreement())
    assert main(cpa("add", str(new))) == 2  # the sample settings name one file, no folder
    assert "agreements.paths names no folder" in capsys.readouterr().err


def test_remove_moves_the_agreement_aside_and_refuses_what_it_cannot(
    setup: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (setup / "second.xml").write_bytes(second_agreement())
    assert main(cpa("remove", SECOND)) == 0
    out = capsys.readouterr().out
    assert f"removed {SECOND}: {setup / 'second.xml'} moved to {setup / 'removed' / 'second.xml'}" in out
    assert (setup / "removed" / "second.xml").read_bytes() == second_agreement()  # nothing deleted
    assert main(cpa("remove", SECOND)) == 2
    assert f"no agreement with CPAId '{SECOND}' in agreements.paths" in capsys.readouterr().err
    assert main(cpa("remove", "cpa-demo-a-b")) == 2
    assert "is the last agreement of the folder" in capsys.readouterr().err
    assert (setup / "demo-a-b.xml").exists()


def test_reload_without_a_server_checks_the_agreements(
    setup: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pid_file = tmp_path / "msh.pid"
    pid_file.write_text("999999999\n")  # left by a process that ended (a SIGKILL)
    monkeypatch.setenv("MSH_SERVER_PID_FILE", str(pid_file))
    assert main(cpa("reload")) == 0
    assert f"no running msh serve found (no live process in {pid_file})" in capsys.readouterr().out
    (setup / "broken.xml").write_bytes(b"<not-a-cpa/>")
    assert main(cpa("reload")) == 1
    assert "broken.xml" in capsys.readouterr().out


# ------------------------------------------------------------------------------------ with a server


def with_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: Callable[[Msh], int]) -> int:
    """Serve party A in this process (its SIGHUP handler on this, the main, thread) and run ``command``
    beside it on a worker thread, as another process would; the server stops afterwards."""
    pid_file = tmp_path / "msh.pid"
    monkeypatch.setenv("MSH_SERVER_PID_FILE", str(pid_file))
    settings = load_settings(CONFIG)
    msh = Msh(settings)

    async def run() -> int:
        stop = asyncio.Event()
        ready = asyncio.Event()
        server = asyncio.create_task(serve(settings, msh, stop=stop, ready=lambda port: ready.set()))
        await asyncio.wait_for(ready.wait(), WAIT)
        write_pid_file(pid_file)  # as msh serve does once it listens
        try:
            return await asyncio.wait_for(asyncio.get_running_loop().run_in_executor(None, command, msh), WAIT)
        finally:
            stop.set()
            await asyncio.wait_for(server, WAIT)

    try:
        return asyncio.run(run())
    finally:
        msh.close()


@pytest.mark.skipif(sys.platform == "win32", reason="SIGHUP is a POSIX signal")
def test_add_and_remove_tell_the_running_server(
    setup: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    new = tmp_path / "second.xml"
    new.write_bytes(second_agreement())
    seen: list[list[str]] = []

    def add_then_remove(msh: Msh) -> int:
        assert main(cpa("add", str(new))) == 0
        seen.append([c.cpaid for c in msh.registry])
        assert main(cpa("remove", SECOND)) == 0
        seen.append([c.cpaid for c in msh.registry])
        return 0

    assert with_server(tmp_path, monkeypatch, add_then_remove) == 0
    assert seen == [["cpa-demo-a-b", SECOND], ["cpa-demo-a-b"]]
    out = capsys.readouterr().out
    assert f"msh serve (pid {os.getpid()}): agreements reloaded: cpa-demo-a-b, {SECOND}; added {SECOND}" in out
    assert f"msh serve (pid {os.getpid()}): agreements reloaded: cpa-demo-a-b; removed {SECOND}" in out


@pytest.mark.skipif(sys.platform == "win32", reason="SIGHUP is a POSIX signal")
def test_a_server_that_refuses_the_set_keeps_its_agreements(
    setup: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    kept: list[list[str]] = []

    def reload_a_broken_folder(msh: Msh) -> int:
        (setup / "broken.xml").write_bytes(b"<not-a-cpa/>")
        code = main(cpa("reload"))
        kept.append([c.cpaid for c in msh.registry])
        return code

    assert with_server(tmp_path, monkeypatch, reload_a_broken_folder) == 1
    assert kept == [["cpa-demo-a-b"]]
    out = capsys.readouterr().out
    assert f"msh serve (pid {os.getpid()}) kept its agreements: " in out and "broken.xml cannot be used" in out
