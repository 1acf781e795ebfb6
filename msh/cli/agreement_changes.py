"""``msh cpa add FILE | remove CPAID | reload --config FILE``: change the agreements of a running MSH.

``add`` copies a checked agreement into the agreements folder (the first folder of ``agreements.paths``),
``remove`` moves one out of it (into its ``removed/`` subfolder: nothing a user saved is deleted), and both
then tell the running ``msh serve`` to reload, as ``reload`` does: the server is found by its pid file
(``server.pid_file``) and sent SIGHUP.

The whole new set is checked first exactly as the server will check it
(:func:`msh.runtime.reload.check_agreement_set`: every file loads, our party is in one, our keys can do what
each asks); a set with a problem changes nothing and the command says why (exit status 1). How the command
learns the server's outcome: the server writes the reload status file beside its pid file
(:mod:`msh.runtime.pidfile`) and the command waits for it (``--timeout``); when the server refuses the set
after all, ``add`` and ``remove`` put the folder back as it was and exit with 1; the server's log says why
too. Without a running server (no pid file, or its process ended) the change takes effect at the next start.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from msh.cli.common import Subcommands, add_command
from msh.errors import ConfigurationError

if TYPE_CHECKING:
    from collections.abc import Callable

    from msh.runtime.config import Settings

__all__ = ["add_change_commands"]

_REMOVED = "removed"  # the subfolder of the agreements folder a removed agreement is moved into


def _folder(settings: Settings) -> Path:
    for path in settings.agreements.paths:
        if path.is_dir():
            return path
    raise ConfigurationError(
        "agreements.paths names no folder: msh cpa add and remove work on a folder of agreements; put the CPA "
        'files in a folder and name it in agreements.paths (e.g. paths = ["cpas"])'
    )


def _check(settings: Settings, files: list[Path]) -> str | None:
    """None when ``files`` are a set the server accepts; else why not (one line per problem)."""
    from cpa.registry import CpaRegistry
    from msh.runtime.reload import check_agreement_set
    from msh.runtime.security import MessageSecurity

    party = (settings.identity.party_id, settings.identity.party_id_type)
    security = MessageSecurity(settings.security, CpaRegistry(), party)  # the keys: as the server reads them
    try:
        check_agreement_set(settings, files, party, security)
    except ConfigurationError as exc:
        return str(exc)
    return None


def _tell_server(settings: Settings, timeout: float, undo: Callable[[], None] | None) -> int:
    """SIGHUP to the running server and its outcome; ``undo`` puts the folder back when it refuses."""
    from msh.runtime.pidfile import read_status, running_server, wait_for_reload

    pid_file = settings.server.pid_file
    pid = running_server(pid_file) if pid_file is not None else None
    if pid_file is None or pid is None:
        why = "server.pid_file is not set" if pid_file is None else f"no live process in {pid_file}"
        print(f"no running msh serve found ({why}): the change takes effect at its next start (or on SIGHUP)")
        return 0
    before = read_status(pid_file)
    os.kill(pid, signal.SIGHUP)
    status = wait_for_reload(pid_file, pid, before, timeout)
    if status is None:
        print(f"msh serve (pid {pid}) did not report the reload within {timeout:g} s; see its log")
        return 1
    if not status.get("ok"):
        if undo is not None:
            undo()
        print(f"msh serve (pid {pid}) kept its agreements: {status.get('problem')}")
        if undo is not None:
            print("the agreements folder was put back as it was")
        return 1
    print(f"msh serve (pid {pid}): {_said(status)}")
    return 0


def _said(status: dict[str, Any]) -> str:
    parts = [f"agreements reloaded: {', '.join(status.get('agreements') or []) or 'none'}"]
    for key, label in (("added", "added"), ("removed", "removed")):
        if status.get(key):
            parts.append(f"{label} {', '.join(status[key])}")
    failed = status.get("failedMessages") or []
    if failed:
        parts.append(f"failed (agreement removed while in flight): {', '.join(failed)}")
    return "; ".join(parts)


def _cpaids(files: list[Path]) -> dict[Path, str]:
    """The CPAId of each file that loads (a file that does not load is left out: the set check names it)."""
    from cpa import CpaError, load

    out: dict[Path, str] = {}
    for f in files:
        try:
            out[f] = load(f, verify_signature=False).cpaid
        except CpaError:
            continue
    return out


def _add(args: argparse.Namespace) -> int:
    from cpa import CpaError, load
    from msh.runtime.config import load_settings

    settings = load_settings(args.config)
    folder = _folder(settings)
    source = Path(args.file).expanduser().resolve()
    if not source.is_file():
        raise ConfigurationError(f"{args.file}: no such file; give the path of a CPA file")
    if source.suffix != ".xml":
        raise ConfigurationError(f"{args.file}: the agreements folder loads only *.xml files; name the file *.xml")
    try:
        cpaid = load(source, verify_signature=settings.agreements.verify_signatures).cpaid
    except CpaError as exc:
        print("\n".join(str(p) for p in exc.problems) or str(exc))
        print(f"{args.file}: not added (the running agreements are unchanged)")
        return 1
    target = folder / source.name
    current = [f for f in settings.agreements.files() if f != target]
    if target.exists():
        if target.read_bytes() != source.read_bytes():
            raise ConfigurationError(
                f"{target} exists and differs from {args.file}: not overwritten; rename the new file, or take the "
                f"old one out first (msh cpa remove)"
            )
        print(f"{target} is already there, unchanged")
    clash = [f for f, c in _cpaids(current).items() if c == cpaid]
    if clash:
        raise ConfigurationError(
            f"CPAId {cpaid} is already loaded from {clash[0]}; remove it first (msh cpa remove {cpaid}) or edit that "
            "file and run msh cpa reload"
        )
    problem = _check(settings, [*current, source])
    if problem is not None:
        print(f"{args.file}: not added, the running agreements are unchanged: {problem}")
        return 1
    added = not target.exists()
    if added:
        temporary = folder / f".{source.name}.{os.getpid()}.tmp"
        shutil.copyfile(source, temporary)
        os.replace(temporary, target)
        print(f"added {cpaid} as {target}")
    return _tell_server(settings, args.timeout, target.unlink if added else None)


def _remove(args: argparse.Namespace) -> int:
    from msh.runtime.config import load_settings

    settings = load_settings(args.config)
    files = list(settings.agreements.files())
    found = [f for f, c in _cpaids(files).items() if c == args.cpaid]
    if not found:
        raise ConfigurationError(
            f"no agreement with CPAId {args.cpaid!r} in agreements.paths; msh cpa list shows the loaded ones"
        )
    path = found[0]
    if path.parent not in settings.agreements.paths:
        raise ConfigurationError(
            f"{path} is named in agreements.paths itself: take it out of the settings file, then run msh cpa reload"
        )
    remaining = [f for f in files if f != path]
    if not any(f.parent == path.parent for f in remaining):
        raise ConfigurationError(
            f"{path} is the last agreement of the folder {path.parent}: the settings would not load without one; "
            "add its replacement first"
        )
    problem = _check(settings, remaining)
    if problem is not None:
        print(f"{args.cpaid}: not removed, the running agreements are unchanged: {problem}")
        return 1
    aside = path.parent / _REMOVED
    aside.mkdir(exist_ok=True)
    target = aside / path.name
    if target.exists():
        target = aside / f"{path.stem}.{os.getpid()}{path.suffix}"
    os.replace(path, target)
    print(f"removed {args.cpaid}: {path} moved to {target}")
    return _tell_server(settings, args.timeout, lambda: os.replace(target, path))


def _reload(args: argparse.Namespace) -> int:
    from msh.runtime.config import load_settings

    settings = load_settings(args.config)
    problem = _check(settings, list(settings.agreements.files()))
    if problem is not None:
        print(f"the agreements of {args.config or 'the settings'} have a problem: {problem}")
    code = _tell_server(settings, args.timeout, None)
    return 1 if problem is not None else code


def add_change_commands(cpa_sub: Subcommands) -> None:
    """Add ``msh cpa add``, ``remove`` and ``reload``."""
    after = (
        " Then the running msh serve (found by server.pid_file) is sent SIGHUP and the command waits for its "
        "reload: exit status 0 when it took the new set, 1 when the set has a problem (it says which file and "
        "what; the server keeps its agreements and the folder is put back). Without a running server, the "
        "change takes effect at its next start."
    )
    add = add_command(
        cpa_sub,
        "add",
        _add,
        help="add an agreement to a running MSH",
        description="Check FILE with the agreements already configured, exactly as msh serve will, and copy it "
        "into the agreements folder (the first folder of agreements.paths); a different file of the same name "
        "there is never overwritten, nor is a CPAId already loaded replaced." + after,
        config=True,
    )
    add.add_argument("file", metavar="FILE", help="the CPA file to add (*.xml)")
    remove = add_command(
        cpa_sub,
        "remove",
        _remove,
        help="remove an agreement from a running MSH",
        description="Move the agreement CPAID out of the agreements folder (into its removed/ subfolder: "
        "nothing is deleted). Messages of ours in flight under it fail with a DeliveryFailure (evidence "
        "agreement-removed) that the application is told; new messages under it are refused." + after,
        config=True,
    )
    remove.add_argument("cpaid", metavar="CPAID", help="the CPAId of the agreement to remove")
    reload = add_command(
        cpa_sub,
        "reload",
        _reload,
        help="have a running MSH reload its agreements",
        description="Check the agreements the settings name and have the running msh serve reload them (as "
        "SIGHUP does)." + after,
        config=True,
    )
    for parser in (add, remove, reload):
        parser.add_argument(
            "--timeout", type=float, default=30.0, help="seconds to wait for the server's reload (default 30)"
        )
