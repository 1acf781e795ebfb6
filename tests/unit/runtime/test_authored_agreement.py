"""Two MSHs on the test network (msh.testing.network) exchange under an agreement written by ``msh cpa new``:
reliable (ebMS2 §6: acknowledgments, duplicate elimination, resends) and signed (ebMS2 §4.1), over a lossy
network, each message delivered exactly once and acknowledged."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from msh.cli import main
from msh.engine import OutboundStatus
from msh.runtime.compose import Payload, Submission
from msh.runtime.config import Settings, settings_from_mapping
from msh.runtime.msh import Msh
from msh.testing.network import TestNetwork

KEYS = Path(__file__).resolve().parents[3] / "samples" / "keys"
TYPE = "urn:oasis:names:tc:ebcore:partyid-type:iso6523:0088"
SERVICE = "urn:example:services:ordering"


def write_agreement(folder: Path) -> Path:
    out = folder / "agreement.xml"
    argv = ["cpa", "new", "--ours", f"111:{TYPE}", "--theirs", f"222:{TYPE}"]
    argv += ["--our-url", "http://a.test:8001/msh", "--their-url", "http://b.test:8002/msh"]
    argv += ["--service", SERVICE, "--action", "NewOrder", "--action", "OrderResponse:receive"]
    argv += ["--reliable", "--sign", "--sync-acks", "--out", str(out)]
    argv += ["--cert", str(KEYS / "party-a.cert.pem"), "--partner-cert", str(KEYS / "party-b.cert.pem")]
    assert main(argv) == 0
    assert main(["cpa", "validate", str(out)]) == 0
    return out


def settings(party: str, key: str, agreement: Path) -> Settings:
    data = {
        "identity": {"party_id": party, "party_id_type": TYPE, "message_id_domain": f"{key}.test"},
        "agreements": {"paths": [str(agreement)]},
        "store": {"url": "memory:"},
        "server": {"tls": False},
        "security": {
            "signing_key": str(KEYS / f"party-{key}.key.pem"),
            "signing_certificate": str(KEYS / f"party-{key}.cert.pem"),
        },
        "sending": {"first_resend_timeout": "PT30S", "http_timeout": "PT2S"},
    }
    return settings_from_mapping(data, base_dir=agreement.parent, source="test", env={})


def status(msh: Msh, message_id: str) -> str | None:
    stored = msh.status(message_id)
    return None if stored is None else stored.state.status.value


@pytest.mark.parametrize("seed", [1, 2])
def test_a_reliable_signed_exchange_under_an_agreement_from_cpa_new(tmp_path: Path, seed: int) -> None:
    agreement = write_agreement(tmp_path)

    async def scenario() -> None:
        # `msh cpa new` makes the agreement valid from the moment it is written (CPP/A 2.0 §9.4.2: Start):
        # the fake clock starts then, not at its fixed default date, which today's agreement postdates.
        net = TestNetwork(seed=seed, start=datetime.now(UTC))
        a = net.add("a", settings("111", "a", agreement))
        b = net.add("b", settings("222", "b", agreement))
        await net.start()
        try:
            net.faults.lose_requests = 0.2  # ebMS2 §6.5.3: lost messages are resent until acknowledged
            net.faults.lose_answers = 0.2
            ids = []
            for n in range(20):
                body = f"<order n='{n}'/>".encode()
                submission = Submission(("222", TYPE), SERVICE, "NewOrder", (Payload(body, "application/xml"),))
                ids.append(await a.submit_async(submission))

            await net.run_until(lambda: all(status(a, i) in ("delivered", "failed") for i in ids))
            statuses = Counter(status(a, i) for i in ids)
            assert statuses == Counter({OutboundStatus.DELIVERED.value: 20})
            # ebMS2 §4.1.3: every message verified before delivery (copies resent included), every signed
            # acknowledgment verified by A; resends and eliminated duplicates show the losses were real.
            assert b.counters["signatures-verified"] >= 20 and a.counters["signatures-verified"] == 20
            assert b.counters["signals-signed"] == 20 and a.counters["resent"] > 0
            seen = Counter(entry.message_id for entry in b.inbox(None, limit=1000))
            assert seen == Counter(dict.fromkeys(ids, 1))  # ebMS2 §6.4.1: once each, duplicates eliminated
            replies = Submission(("111", TYPE), SERVICE, "OrderResponse", (Payload(b"<ok/>", "application/xml"),))
            reply = await b.submit_async(replies)  # the other way round: the partner sends OrderResponse
            await net.run_until(lambda: status(b, reply) == "delivered")
        finally:
            await net.close()

    asyncio.run(scenario())
