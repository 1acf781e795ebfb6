"""The store's errors: one branch of the MSH's exception tree (:class:`~msh.errors.MshError`)."""

from __future__ import annotations

from msh.errors import MshError
from msh.store.records import Direction

__all__ = ["DuplicateKey", "DuplicateMessage", "StoreError", "TransactionLost", "UnknownBlob", "UnknownMessage"]


class StoreError(MshError):
    """The store could not do what was asked (the database failed, or the call is not allowed here)."""


class DuplicateMessage(StoreError):
    """A message with this MessageId is already stored; the transaction stays usable."""

    def __init__(self, message_id: str, direction: Direction) -> None:
        super().__init__(f"{direction.value} message {message_id!r} is already stored")
        self.message_id = message_id
        self.direction = direction


class DuplicateKey(StoreError):
    """A record of the application interfaces with this key (a request's Message-ID, a batch id) is
    already stored; nothing was written and the transaction stays usable."""

    def __init__(self, key: str, what: str) -> None:
        super().__init__(f"{what} {key!r} is already stored")
        self.key = key
        self.what = what


class TransactionLost(StoreError):
    """The database ended the whole transaction (e.g. a disk or I/O error rolled it back): nothing of it
    will be committed and it must be left."""


class UnknownMessage(StoreError, LookupError):
    """No stored message has this MessageId (or no inbox entry this id)."""

    def __init__(self, key: str | int, what: str = "message") -> None:
        super().__init__(f"no {what} {key!r} is stored")
        self.key = key


class UnknownBlob(StoreError, LookupError):
    """No blob has this id."""

    def __init__(self, blob_id: int) -> None:
        super().__init__(f"no blob {blob_id} is stored")
        self.blob_id = blob_id
