"""Two real MSH processes on loopback, for integration tests, the crash test and benchmarks.

:func:`make_pair` writes, into a work folder, a copy of the demo agreement with free ports and the
reliability asked for (Retries, RetryInterval), and a settings file per partner; :class:`Partner` starts,
stops (SIGTERM) and kills (SIGKILL) ``msh serve`` for one of them. Partner B listens behind a
:class:`~msh.faults.proxy.LossyProxy` port (the port the agreement names) when ``proxy`` is set, so a test
can lose requests and acknowledgments or take the network down.
"""

from __future__ import annotations

import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from msh.errors import ConfigurationError

__all__ = ["PARTY_A", "PARTY_B", "Pair", "Partner", "free_port", "make_pair", "substitute"]

ROOT = Path(__file__).resolve().parent.parent.parent
SAMPLES = ROOT / "samples"
ISO6523 = "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088"
PARTY_A = ("123456789", ISO6523)
PARTY_B = ("987654321", ISO6523)
SERVICE, ACTION = "urn:example:services:ordering", "NewOrder"


_EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")


def _ephemeral_range() -> tuple[int, int]:
    """The kernel's range of ports for outgoing connections (Linux; the IANA range elsewhere)."""
    try:
        low, high = (int(x) for x in _EPHEMERAL.read_text().split())
    except (OSError, ValueError):
        return 49152, 65535
    return low, high


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago.

    It is taken below the kernel's ephemeral range when it can be: a port from that range may be given to
    an outgoing connection (of any process on the machine) between this call and the server's bind."""
    low, _ = _ephemeral_range()
    if low > 20_000:
        rng = random.SystemRandom()
        for _ in range(50):
            port = rng.randrange(10_000, low)
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def substitute(text: str, replacements: Mapping[str, str], source: Path) -> str:
    """``text`` with each key of ``replacements`` replaced by its value, in one pass (a replacement is
    never replaced again). :class:`ConfigurationError` when a key does not occur: the sample file
    ``source`` changed and the code that copies it must follow."""
    missing = [old for old in replacements if old not in text]
    if missing:
        raise ConfigurationError(
            f"{source} no longer contains {', '.join(map(repr, missing))}; update the code that copies it ({__name__})"
        )
    pattern = re.compile("|".join(re.escape(old) for old in sorted(replacements, key=len, reverse=True)))
    return pattern.sub(lambda m: replacements[m.group(0)], text)


@dataclass
class Partner:
    """One ``msh serve`` process: its settings file, store, port, log; start/stop/kill it.

    ``env`` holds extra environment variables for the process (on top of this process's environment), e.g.
    ``MSH_STORE_URL`` or ``MSH_SERVER_PORT`` overriding the settings file; ``store`` and ``port`` only say
    where the process keeps its store and listens, they are not passed to it.
    """

    name: str
    config: Path
    store: Path
    port: int
    log: Path
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    starts: int = 0
    env: dict[str, str] = field(default_factory=dict, kw_only=True)

    def start(self, timeout: float = 30.0) -> None:
        """Start ``msh serve`` and wait until it listens."""
        if self.alive:
            return
        mark = self.log.stat().st_size if self.log.exists() else 0
        out = open(self.log, "ab")  # noqa: SIM115 - owned by the child process
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "msh.cli", "serve", "--config", str(self.config), "--log-level", "warning"],
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **self.env},
            )
        finally:
            out.close()
        self.starts += 1
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with open(self.log, "rb") as f:
                f.seek(mark)
                if b"listening on" in f.read():
                    return
            if self.proc.poll() is not None:
                raise ConfigurationError(
                    f"partner {self.name} exited at start:\n{self.log.read_text(errors='replace')}"
                )
            time.sleep(0.05)
        raise ConfigurationError(
            f"partner {self.name} did not listen within {timeout:g} s:\n{self.log.read_text(errors='replace')}"
        )

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM, then SIGKILL if it does not end within ``timeout``."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None

    def kill(self) -> None:
        """SIGKILL: the process dies wherever it is (docs/design.md §5.6)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None


@dataclass
class Pair:
    """Partners A and B of one agreement in ``work``; ``b_public_port`` is where A sends (the proxy's port
    when B is behind one, else B's own)."""

    work: Path
    cpa: Path
    a: Partner
    b: Partner
    b_public_port: int

    def stop(self) -> None:
        for partner in (self.a, self.b):
            partner.stop()


def _settings_text(
    name: str, party: tuple[str, str], cpa: Path, store: Path, port: int, options: dict[str, str]
) -> str:
    key = "a" if name == "A" else "b"
    lines = [
        "[identity]",
        f'party_id = "{party[0]}"',
        f'party_id_type = "{party[1]}"',
        f'message_id_domain = "party-{key}.test"',
        "[agreements]",
        f"paths = [{str(cpa)!r}]",
        "[store]",
        f"url = {str(store)!r}",
        "[server]",
        'host = "127.0.0.1"',
        f"port = {port}",
        "[tls]",
        f"certificate = {str(SAMPLES / 'keys' / f'party-{key}.cert.pem')!r}",
        f"private_key = {str(SAMPLES / 'keys' / f'party-{key}.key.pem')!r}",
        "[security]",  # the agreement has both parties sign (ebMS2 §4.1.3)
        f"signing_key = {str(SAMPLES / 'keys' / f'party-{key}.key.pem')!r}",
        f"signing_certificate = {str(SAMPLES / 'keys' / f'party-{key}.cert.pem')!r}",
        "[sending]",
        f'first_resend_timeout = "{options["first_resend"]}"',
        f'http_timeout = "{options["http_timeout"]}"',
        "[timers]",
        f'poll_interval = "{options["poll"]}"',
        f'lease = "{options["lease"]}"',
        f'renew_interval = "{options["renew"]}"',
    ]
    return "\n".join(lines) + "\n"


def make_pair(
    work: Path,
    *,
    retries: int = 5,
    retry_interval: str = "PT1S",
    first_resend: str = "PT1S",
    http_timeout: str = "PT0.8S",
    poll: str = "PT0.2S",
    lease: str = "PT2S",
    renew: str = "PT0.5S",
    proxy: bool = True,
    message_order: bool = False,
) -> Pair:
    """Write the agreement and both settings files into ``work`` (see the module docs); with
    ``message_order`` the business channels guarantee order (MessageOrderSemantics Guaranteed, and
    syncReplyMode none, which ebMS2 §9.1 requires with it: acknowledgments come back asynchronously)."""
    work.mkdir(parents=True, exist_ok=True)
    a_port, b_port = free_port(), free_port()
    b_public = free_port() if proxy else b_port
    source = SAMPLES / "cpas" / "demo-a-b.xml"
    text = substitute(
        source.read_text(encoding="utf-8"),
        {
            "https://127.0.0.1:8081/msh": f"https://127.0.0.1:{a_port}/msh",
            "https://127.0.0.1:8082/msh": f"https://127.0.0.1:{b_public}/msh",
            "<tp:Retries>5</tp:Retries>": f"<tp:Retries>{retries}</tp:Retries>",
            "<tp:RetryInterval>PT5S</tp:RetryInterval>": f"<tp:RetryInterval>{retry_interval}</tp:RetryInterval>",
        },
        source,
    )
    if message_order:
        text = text.replace(">NotGuaranteed<", ">Guaranteed<").replace(
            'tp:syncReplyMode="mshSignalsOnly"', 'tp:syncReplyMode="none"'
        )
    cpa = work / "agreement.xml"
    cpa.write_text(text, encoding="utf-8")
    options = {"first_resend": first_resend, "http_timeout": http_timeout, "poll": poll, "lease": lease, "renew": renew}
    partners = []
    for name, party, port in (("A", PARTY_A, a_port), ("B", PARTY_B, b_port)):
        key = name.lower()
        store = work / f"party-{key}.sqlite"
        config = work / f"party-{key}.toml"
        config.write_text(_settings_text(name, party, cpa, store, port, options), encoding="utf-8")
        partners.append(Partner(name, config, store, port, work / f"party-{key}.log"))
    return Pair(work, cpa, partners[0], partners[1], b_public)
