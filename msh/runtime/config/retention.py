"""The settings of retention (``[retention]``): when ``msh serve`` purges what has ended, and how long a message is
kept at least (:mod:`msh.runtime.retention`; declared like every section, :mod:`.model`, :mod:`.declaration`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import ClassVar

from msh.runtime.config import rules
from msh.runtime.config.declaration import DURATION_HINT, WHOLE_HINT, Section, setting

__all__ = ["RetentionSettings"]


@dataclass(frozen=True, slots=True)
class RetentionSettings(Section):
    """Purging messages whose outcome is final (``msh purge``, and ``msh serve`` every ``interval`` when
    ``enabled``). A message is kept at least ``keep`` after its outcome became final, and at least its
    agreement's PersistDuration after it was first sent or received (ebMS2 §6.4.6); ``batch_size`` messages
    are removed per transaction."""

    section: ClassVar[str] = "retention"

    enabled: bool = field(
        default=False,
        metadata=setting(meaning="msh serve purges on its own every `retention.interval` (msh purge works either way)"),
    )
    interval: timedelta = field(
        default=timedelta(hours=1),
        metadata=setting(
            DURATION_HINT.format("PT1H", 3600), check=rules.positive, meaning="how often msh serve purges"
        ),
    )
    keep: timedelta = field(
        default=timedelta(days=30),
        metadata=setting(
            DURATION_HINT.format("P30D", 2592000),
            check=rules.not_negative,
            meaning="how long a message is kept at least after its outcome became final (its agreement's "
            "PersistDuration since it was first sent or received applies too, whichever ends later; for a "
            "message whose agreement is no longer loaded, this alone)",
        ),
    )
    batch_size: int = field(
        default=500,
        metadata=setting(WHOLE_HINT.format(500), check=rules.at_least_one, meaning="messages removed per transaction"),
    )
