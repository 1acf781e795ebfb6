"""Three real MSH processes on loopback: party A, an intermediary I and party C (ebMS2 §10), for the
multi-hop demo and the multi-hop crash test.

:func:`make_chain` copies the multi-hop samples into a work folder: the agreement
``samples/cpas/demo-routed-a-c.xml`` (C's endpoint in it is the intermediary's) and the settings
``samples/config/multihop/{party-a,intermediary,party-c}.toml`` with free ports, the work folder's stores
and the timings asked for. The keys are the published demo keys of ``samples/keys``, which the agreement
names: A's and C's certificates, and the intermediary's as the certificate C's endpoint presents
(``C_IntermediaryCert``); the routes trust the next hop's certificate by file. With ``proxies``, I and C
listen on ports of their own behind the ports the agreement and the routes name, where a
:class:`~msh.faults.proxy.LossyProxy` goes (:meth:`Chain.proxied_hops`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from msh.errors import ConfigurationError
from msh.faults.pair import ISO6523, SAMPLES, Partner, free_port, substitute

__all__ = ["PARTY_C", "Chain", "Timings", "make_chain"]

PARTY_C = ("555555555", ISO6523)
INTERMEDIARY = ("999999999", ISO6523)
_SAMPLE_CPA = SAMPLES / "cpas" / "demo-routed-a-c.xml"
_SAMPLE_CONFIG = SAMPLES / "config" / "multihop"
# The ports of the samples: A's endpoint, the intermediary's (C's endpoint in the agreement), C's own.
_A, _I, _C = 8081, 8090, 8092


@dataclass(frozen=True, slots=True)
class Timings:
    """The reliability and timer settings of a chain (xs:durations).

    ``retries``/``retry_interval`` go into the agreement (A's and C's own messages: A's resends, and the
    end-to-end deadline of a forwarded message); ``route_retries``/``route_retry_interval`` into every route
    (the intermediary's resends of a forward, everyone's resends of a routed signal); the others into the
    settings of all three MSHs.
    """

    retries: int = 5
    retry_interval: str = "PT5S"
    route_retries: int = 5
    route_retry_interval: str = "PT5S"
    first_resend: str = "PT5S"
    http_timeout: str = "PT2S"
    connect_timeout: str = "PT1S"
    poll: str = "PT0.5S"
    lease: str = "PT10S"
    renew: str = "PT3S"


@dataclass
class Chain:
    """A, I and C in ``work``. ``i_public_port``/``c_public_port`` are where I and C are reached (the
    agreement's and the routes' ports): a proxy's when the chain was made with proxies, else their own."""

    work: Path
    cpa: Path
    a: Partner
    i: Partner
    c: Partner
    i_public_port: int
    c_public_port: int

    @property
    def partners(self) -> tuple[Partner, Partner, Partner]:
        """C, I and A: the order to start them in (each is up before the one that sends to it)."""
        return (self.c, self.i, self.a)

    def proxied_hops(self) -> tuple[tuple[tuple[str, int], tuple[str, int]], tuple[tuple[str, int], tuple[str, int]]]:
        """(listen, target) of the proxy in front of I (hop A→I, and C's signals to I) and of the one in
        front of C (hop I→C)."""
        if self.i_public_port == self.i.port:
            raise ValueError("this chain was made without proxies (make_chain(proxies=False))")
        host = "127.0.0.1"
        return (
            ((host, self.i_public_port), (host, self.i.port)),
            ((host, self.c_public_port), (host, self.c.port)),
        )

    def stop(self) -> None:
        """Stop every process that runs (SIGTERM, then SIGKILL)."""
        for partner in reversed(self.partners):
            partner.stop()

    def kill(self) -> None:
        """SIGKILL every process that still runs."""
        for partner in self.partners:
            partner.kill()


def _toml_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _set_settings(text: str, values: Mapping[str, str], source: Path) -> str:
    """``text`` with the value of every ``key = value`` line of each ``section.key`` in ``values`` replaced
    within its section (comments kept; ``routing.routes.KEY`` in every route). :class:`ConfigurationError`
    when a key has no such line."""
    found: dict[str, int] = dict.fromkeys(values, 0)
    lines = text.split("\n")
    section = ""
    for n, line in enumerate(lines):
        header = re.match(r"^\s*\[\[?\s*([A-Za-z0-9_.]+)\s*\]\]?", line)
        if header is not None:
            section = header.group(1)
            continue
        assignment = re.match(r"^(\s*)([A-Za-z0-9_]+)(\s*=\s*)(\"[^\"\n]*\"|\[[^\]\n]*\]|[^\s#]+)(.*)$", line)
        if assignment is None:
            continue
        name = f"{section}.{assignment.group(2)}"
        if name in values:
            lines[n] = (
                assignment.group(1) + assignment.group(2) + assignment.group(3) + values[name] + assignment.group(5)
            )
            found[name] += 1
    missing = [name for name, count in found.items() if not count]
    if missing:
        raise ConfigurationError(f"{source} no longer sets {', '.join(missing)}; update {__name__}")
    return "\n".join(lines)


def _only(urls: Mapping[str, str], *ports: int) -> dict[str, str]:
    return {old: new for old, new in urls.items() if any(old.endswith(f":{p}/msh") for p in ports)}


def make_chain(work: Path, *, timings: Timings | None = None, proxies: bool = True) -> Chain:
    """Write the agreement and the three settings files into ``work`` (see the module docs)."""
    t = timings or Timings()
    work.mkdir(parents=True, exist_ok=True)
    a_port, i_port, c_port = free_port(), free_port(), free_port()
    i_public, c_public = (free_port(), free_port()) if proxies else (i_port, c_port)
    # One pass over each file: the sample ports become ours wherever they stand (endpoints, next hops).
    urls = {
        f"https://127.0.0.1:{_A}/msh": f"https://127.0.0.1:{a_port}/msh",
        f"https://127.0.0.1:{_I}/msh": f"https://127.0.0.1:{i_public}/msh",
        f"https://127.0.0.1:{_C}/msh": f"https://127.0.0.1:{c_public}/msh",
    }
    cpa_text = substitute(
        _SAMPLE_CPA.read_text(encoding="utf-8"),
        {
            **_only(urls, _A, _I),
            "<tp:Retries>5</tp:Retries>": f"<tp:Retries>{t.retries}</tp:Retries>",
            "<tp:RetryInterval>PT5S</tp:RetryInterval>": f"<tp:RetryInterval>{t.retry_interval}</tp:RetryInterval>",
        },
        _SAMPLE_CPA,
    )
    cpa = work / "agreement.xml"
    cpa.write_text(cpa_text, encoding="utf-8")
    common = {
        "sending.first_resend_timeout": _toml_string(t.first_resend),
        "sending.http_timeout": _toml_string(t.http_timeout),
        "sending.connect_timeout": _toml_string(t.connect_timeout),
        "timers.poll_interval": _toml_string(t.poll),
        "timers.lease": _toml_string(t.lease),
        "timers.renew_interval": _toml_string(t.renew),
        "routing.routes.retries": str(t.route_retries),
        "routing.routes.retry_interval": _toml_string(t.route_retry_interval),
    }
    partners = []
    keys = {'"../../keys/': _toml_string(f"{SAMPLES / 'keys'}/")[:-1]}
    for name, sample, port, agreement, next_hops in (
        ("A", "party-a", a_port, True, _only(urls, _I)),
        ("I", "intermediary", i_port, False, _only(urls, _A, _C)),
        ("C", "party-c", c_port, True, _only(urls, _I)),
    ):
        source = _SAMPLE_CONFIG / f"{sample}.toml"
        text = substitute(source.read_text(encoding="utf-8"), {**next_hops, **keys}, source)
        store = work / f"{sample}.sqlite"
        values = {**common, "server.port": str(port), "store.url": _toml_string(str(store))}
        if agreement:
            values["agreements.paths"] = f"[{_toml_string(str(cpa))}]"
        config = work / f"{sample}.toml"
        config.write_text(_set_settings(text, values, source), encoding="utf-8")
        partners.append(Partner(name, config, store, port, work / f"{sample}.log"))
    a, i, c = partners
    return Chain(work, cpa, a, i, c, i_public, c_public)
