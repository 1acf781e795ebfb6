"""The demo agreement (``samples/cpas/demo-a-b.xml``) changed so that party B takes its messages by e-mail
(ebMS2 Appendix B.3): B's TransportReceiver with another TransportProtocol and Endpoint."""

from __future__ import annotations

import re
from typing import Final

from tests.support.agreement_files import demo_bytes

_B_RECEIVER: Final = re.compile(
    rb'(<tp:Transport tp:transportId="B_Transport">.*?)<tp:TransportReceiver>.*?</tp:TransportReceiver>', re.DOTALL
)


def with_b_receiving(protocol: str, uri: str, *, data: bytes | None = None) -> bytes:
    """The demo agreement with B's TransportReceiver replaced: ``protocol`` and the allPurpose Endpoint ``uri``."""
    receiver = (
        f'<tp:TransportReceiver><tp:TransportProtocol>{protocol}</tp:TransportProtocol><tp:Endpoint tp:uri="{uri}" '
        'tp:type="allPurpose"/></tp:TransportReceiver>'
    ).encode()
    changed, count = _B_RECEIVER.subn(lambda m: m.group(1) + receiver, data or demo_bytes())
    assert count == 1
    return changed


def sync_none(data: bytes) -> bytes:
    """``data`` with every channel's syncReplyMode none: every reply travels on its own (ebMS2 B.3.3)."""
    return data.replace(b'tp:syncReplyMode="mshSignalsOnly"', b'tp:syncReplyMode="none"')
