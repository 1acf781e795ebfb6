"""Two parties set up by ``msh init`` (A from the partner's answers, B from A's agreement) exchange a reliable,
signed message between two real ``msh serve`` processes on 127.0.0.1; ``msh send --wait`` sees it delivered."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from msh.cli import main
from msh.faults.pair import Partner, free_port
from msh.runtime.config import load_settings

KEYS = Path(__file__).resolve().parents[2] / "samples" / "keys"
TYPE = "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088"


def test_two_parties_from_msh_init_exchange_a_signed_reliable_message(tmp_path: Path) -> None:
    b_port = free_port()
    a_answers = ["init", str(tmp_path / "a"), "--party", f"111:{TYPE}", "--partner", f"222:{TYPE}"]
    a_answers += ["--their-url", f"http://127.0.0.1:{b_port}/msh", "--service", "urn:example:orders"]
    a_answers += ["--action", "NewOrder", "--reliable", "--sign", "--partner-cert", str(KEYS / "party-b.cert.pem")]
    assert main(a_answers) == 0
    agreement = tmp_path / "a" / "agreements" / "cpa-111-222.xml"
    assert main(["init", str(tmp_path / "b"), "--party", f"222:{TYPE}", "--cpa", str(agreement)]) == 0
    # The agreement names B's certificate given by A (the sample one): B signs with its key.
    for suffix in ("key", "cert"):
        shutil.copyfile(KEYS / f"party-b.{suffix}.pem", tmp_path / "b" / "keys" / f"party.{suffix}.pem")
    partners = []
    for name in ("a", "b"):
        config = tmp_path / name / "msh.toml"
        settings = load_settings(config, env={})
        partners.append(
            Partner(name, config, tmp_path / name / "msh.sqlite", settings.server.port, tmp_path / f"{name}.log")
        )
    assert partners[1].port == b_port  # B listens where the agreement says
    try:
        for partner in partners:
            partner.start()
        payload = tmp_path / "order.xml"
        payload.write_text("<order n='1'/>")
        command = [sys.executable, "-m", "msh.cli", "send", "--config", str(partners[0].config), "--to", "222"]
        command += ["--service", "urn:example:orders", "--action", "NewOrder"]
        command += ["--payload", f"{payload}=application/xml", "--wait", "60"]
        sent = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert sent.returncode == 0, (
            sent.stdout + sent.stderr + partners[0].log.read_text() + partners[1].log.read_text()
        )
        assert "delivered (the To party acknowledged it)" in sent.stdout
    finally:
        for partner in partners:
            partner.stop()
    assert "signatures-verified 1" in partners[1].log.read_text()
