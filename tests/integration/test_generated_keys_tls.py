"""Two real ``msh serve`` processes exchange a signed, reliable message over mutual TLS with certificates from
``msh keys generate --host 127.0.0.1`` (issue 23): the agreement names each party's self-signed leaf as its
certificate (CPP/A 2.0 §8.4.33) and as the TLS server and client certificate (§8.4.26, §8.4.31), and that is
all either side trusts. The agreement is the sample demo agreement with both ``tp:Certificate`` elements
replaced by the ones the command printed; the settings point at the generated keys. Every wait is bounded.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from lxml import etree

from msh.engine import OutboundStatus
from msh.faults.pair import ACTION, PARTY_B, SAMPLES, SERVICE, make_pair
from msh.runtime.compose import Payload, Submission
from msh.runtime.config import load_settings
from msh.runtime.msh import Msh
from msh.store import open_store
from tests.support.outcomes import wait_final

CPPA = "http://www.oasis-open.org/committees/ebxml-cppa/schema/cpp-cpa-2_0.xsd"
TIMEOUT = 60.0


def _msh(*args: str) -> subprocess.CompletedProcess[str]:
    """``msh ARGS`` in a process of its own, as a user types it."""
    return subprocess.run(
        [sys.executable, "-m", "msh.cli", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        check=False,
    )


def _generate(party: str, cert_id: str, out: Path) -> etree._Element:
    done = _msh("keys", "generate", party, "--host", "127.0.0.1", "--out", str(out), "--cert-id", cert_id)
    assert done.returncode == 0, done.stderr
    return etree.fromstring(done.stdout.strip())


def _fill_agreement(agreement: Path, elements: dict[str, etree._Element]) -> None:
    """Replace the agreement's Certificate elements by certId with the generated ones."""
    tree = etree.parse(str(agreement))
    for cert_id, element in elements.items():
        [old] = tree.getroot().iterfind(f".//{{{CPPA}}}Certificate[@{{{CPPA}}}certId='{cert_id}']")
        old.getparent().replace(old, element)
    tree.write(str(agreement), encoding="utf-8", xml_declaration=True)


def _use_keys(config: Path, sample: str, cert: Path, key: Path) -> None:
    """Point the partner's settings (TLS and signing) at the generated key pair instead of the sample one."""
    text = config.read_text(encoding="utf-8")
    keys = SAMPLES / "keys"
    for old, new in ((keys / f"{sample}.cert.pem", cert), (keys / f"{sample}.key.pem", key)):
        assert repr(str(old)) in text
        text = text.replace(repr(str(old)), repr(str(new)))
    config.write_text(text, encoding="utf-8")


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-4000:] if log.exists() else "(no log)"


def test_two_msh_exchange_over_mutual_tls_with_generated_certificates(tmp_path: Path) -> None:
    pair = make_pair(tmp_path / "pair", proxy=False, retries=3)
    keys = tmp_path / "keys"
    elements = {
        "A_Cert": _generate("Party A", "A_Cert", keys),
        "B_Cert": _generate("Party B", "B_Cert", keys),
    }
    _fill_agreement(pair.cpa, elements)
    _use_keys(pair.a.config, "party-a", keys / "Party_A.cert.pem", keys / "Party_A.key.pem")
    _use_keys(pair.b.config, "party-b", keys / "Party_B.cert.pem", keys / "Party_B.key.pem")

    validated = _msh("cpa", "validate", str(pair.cpa))
    assert validated.returncode == 0 and validated.stdout.strip().endswith("status agreed)"), validated.stdout
    shown = _msh("cpa", "show", str(pair.cpa))
    assert "certificate A_Cert: CN=Party A, expires" in shown.stdout
    assert "certificate B_Cert: CN=Party B, expires" in shown.stdout

    try:
        pair.b.start()  # refused before the fix: "no agreement names a certificate to trust"
        pair.a.start()
        msh = Msh(load_settings(pair.a.config, env={}))
        try:
            message_id = msh.submit(
                Submission(PARTY_B, SERVICE, ACTION, (Payload(b"<order id='1'/>", "application/xml"),))
            )
            final = wait_final(msh, [message_id], timeout=TIMEOUT)
            attempts = msh.status(message_id)
        finally:
            msh.close()
        assert final == {message_id: OutboundStatus.DELIVERED}, (
            f"{final}; A's log:\n{_tail(pair.a.log)}\nB's log:\n{_tail(pair.b.log)}"
        )
        assert attempts is not None and attempts.state.attempts == 1  # no TLS failure before it got through
    finally:
        pair.stop()
    with open_store(str(pair.b.store), migrate=False) as store, store.transaction(readonly=True) as tx:
        assert [e.message_id for e in tx.inbox_list(None, limit=10)] == [message_id]
    log = pair.a.log.read_text(errors="replace") + pair.b.log.read_text(errors="replace")
    assert "certificate verify failed" not in log and "mismatch" not in log
