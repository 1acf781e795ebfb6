"""The partners the agreements name, as the store and the journal name them (``type:value``, ebCore's combined
form, or the bare value: :func:`msh.engine.signals.party_text`) with a short label for the pages."""

from __future__ import annotations

from collections.abc import Iterable

from cpa.model import CollaborationProtocolAgreement
from msh.engine.signals import party_text

__all__ = ["known_partners", "resolve_partner"]


def known_partners(agreements: Iterable[CollaborationProtocolAgreement]) -> dict[str, str]:
    """Each party's PartyIds (as stored) -> a short label, ``PartyName (value)``."""
    known: dict[str, str] = {}
    for cpa in agreements:
        for info in cpa.party_infos:
            for pid in info.party_ids:
                known.setdefault(party_text(pid.value, pid.type), f"{info.party_name} ({pid.value})")
    return known


def resolve_partner(given: str, known: dict[str, str]) -> str:
    """What an operator typed as a partner, as stored: a PartyId as stored stays; a bare value that one known
    PartyId has (its type left out) becomes that PartyId; anything else is looked for as written."""
    if given in known:
        return given
    matches = [text for text in known if text.rsplit(":", 1)[-1] == given]
    return matches[0] if len(matches) == 1 else given
