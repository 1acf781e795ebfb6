"""A private Dovecot IMAP server for the mailbox tests and the SMTP crash test (ebMS2 B.3 over a real mailbox):
its own configuration in a folder of its own (runtime folder, a passwd-file with one user and a plain
password, maildirs, a log file), listening on 127.0.0.1 on a free port, started with ``dovecot -F -c CONFIG``
in the foreground and stopped at the end. No system service or file is touched. It can be stopped, or killed
with SIGKILL, and started again on the same port (the "mail server restarted" case). When the dovecot binary
is missing or cannot start, :class:`DovecotUnavailable` says why (tests skip with that reason).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from msh.errors import ConfigurationError

__all__ = ["PASSWORD", "USER", "Dovecot", "DovecotUnavailable", "private_dovecot"]

USER = "msh"
PASSWORD = "mailbox-secret-1"
START_TIMEOUT = 20.0


class DovecotUnavailable(ConfigurationError):
    """No private Dovecot can run here: the message says why and what to install."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _accounts() -> tuple[str, str, int, int]:
    """The internal and login users Dovecot runs as, and the uid/gid of the mail files."""
    if os.geteuid() != 0:
        me = pwd.getpwuid(os.geteuid())
        return me.pw_name, me.pw_name, me.pw_uid, me.pw_gid
    try:
        internal = pwd.getpwnam("dovecot")
        login = pwd.getpwnam("dovenull")
    except KeyError:
        raise DovecotUnavailable(
            "dovecot runs as root here but the users dovecot and dovenull are missing (install dovecot-core)"
        ) from None
    return internal.pw_name, login.pw_name, internal.pw_uid, internal.pw_gid


@dataclass
class Dovecot:
    """A private Dovecot: ``port`` on 127.0.0.1, the user ``USER`` with ``PASSWORD``."""

    root: Path
    port: int = field(default_factory=_free_port)
    process: subprocess.Popen[bytes] | None = None
    certificate: Path | None = None
    """With ``private_key``: TLS on, STARTTLS on ``port`` and TLS from the first byte on ``tls_port``."""
    private_key: Path | None = None
    tls_port: int = field(default_factory=_free_port)

    @property
    def log(self) -> str:
        path = self.root / "dovecot.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def configure(self) -> None:
        internal, login, uid, gid = _accounts()
        for name in ("run", "mail", "home"):
            (self.root / name).mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o755)
        if os.geteuid() == 0:
            for name in ("mail", "home"):
                os.chown(self.root / name, uid, gid)
        if self.certificate is not None and self.private_key is not None:
            shutil.copy(self.certificate, self.root / "cert.pem")
            shutil.copy(self.private_key, self.root / "key.pem")
            os.chmod(self.root / "key.pem", 0o600)
            tls = f"ssl = yes\nssl_cert = <{self.root / 'cert.pem'}\nssl_key = <{self.root / 'key.pem'}"
            imaps = f"address = 127.0.0.1\n    port = {self.tls_port}"
        else:
            tls, imaps = "ssl = no", "port = 0"
        (self.root / "users").write_text(f"{USER}:{{PLAIN}}{PASSWORD}:{uid}:{gid}::{self.root / 'home' / USER}\n")
        (self.root / "dovecot.conf").write_text(
            f"""
base_dir = {self.root / "run"}
state_dir = {self.root / "run" / "state"}
log_path = {self.root / "dovecot.log"}
protocols = imap
listen = 127.0.0.1
{tls}
disable_plaintext_auth = no
auth_mechanisms = plain login
default_internal_user = {internal}
default_login_user = {login}
first_valid_uid = 0
mail_location = maildir:{self.root / "mail"}/%u
namespace inbox {{
  inbox = yes
  separator = /
}}
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {self.root / "users"}
}}
userdb {{
  driver = passwd-file
  args = username_format=%u {self.root / "users"}
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {self.port}
  }}
  inet_listener imaps {{
    {imaps}
  }}
}}
service stats {{
  unix_listener stats-writer {{
    mode = 0666
  }}
}}
shutdown_clients = yes
protocol imap {{
  mail_max_userip_connections = 100
}}
"""
        )

    def start(self) -> None:
        """Start it and wait (bounded) until it answers on its port; :class:`DovecotUnavailable` when it cannot."""
        binary = shutil.which("dovecot") or ("/usr/sbin/dovecot" if Path("/usr/sbin/dovecot").exists() else None)
        if binary is None:
            raise DovecotUnavailable(
                "the dovecot binary is not installed (Debian package dovecot-imapd; scripts/test installs it)"
            )
        config = str(self.root / "dovecot.conf")
        self.process = subprocess.Popen(
            [binary, "-F", "-c", config],
            stdout=subprocess.DEVNULL,
            stderr=open(self.root / "stderr.log", "ab"),  # noqa: SIM115 (the child keeps it)
            start_new_session=True,  # its own process group: stop() ends its imap processes too
        )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                stderr = (self.root / "stderr.log").read_text(errors="replace")[-2000:]
                raise DovecotUnavailable(
                    f"dovecot could not start (exit {self.process.returncode}): {stderr or self.log}"
                )
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                if s.recv(100).startswith(b"* OK"):
                    return
            time.sleep(0.1)
        self.stop()
        raise DovecotUnavailable(
            f"dovecot did not answer on 127.0.0.1:{self.port} within {START_TIMEOUT:.0f} s: {self.log}"
        )

    name = "mailbox server killed"

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def maildir(self) -> Path:
        """The maildir of ``USER`` (where a mail drop delivers)."""
        return self.root / "mail" / USER

    @property
    def mail_owner(self) -> tuple[int, int]:
        """The uid and gid the mail files must belong to."""
        _internal, _login, uid, gid = _accounts()
        return uid, gid

    def kill(self) -> None:
        """SIGKILL the server and every session it started (a crash), and wait until its port is closed."""
        process = self.process
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        self.stop()

    def stop(self) -> None:
        """Stop it (SIGTERM, then SIGKILL after 10 s) and wait until its port is closed."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)  # the master and every session it started
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
            except OSError:
                return
            time.sleep(0.1)


@contextlib.contextmanager
def private_dovecot(certificate: Path | None = None, private_key: Path | None = None) -> Iterator[Dovecot]:
    """A started private Dovecot in a folder of its own (under the system temp folder, which its unprivileged
    processes can reach), removed at the end; with TLS when given a certificate and its key (PEM files)."""
    root = Path(tempfile.mkdtemp(prefix="msh-dovecot-"))
    server = Dovecot(root, certificate=certificate, private_key=private_key)
    try:
        server.configure()
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
