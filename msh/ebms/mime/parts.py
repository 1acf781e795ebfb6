"""A parsed ebXML Message Package (ebMS2 §2.1): the SOAP part and the payload parts, each with its headers and
its content (:class:`MimePackage`, :class:`MimePart`)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

from msh.ebms.mime.body import Closing, PartBody
from msh.ebms.mime.headers import strip_angle
from msh.errors import Issue

__all__ = ["MimePackage", "MimePart"]


@dataclass(frozen=True)
class MimePart:
    """One part of a package: its headers and its decoded content.

    ``content_id`` is the Content-ID without angle brackets (``None`` when absent); ``content_type`` the
    Content-Type header as received (``text/plain; charset=us-ascii`` when absent, RFC 2045 §5.2);
    ``media_type`` its lower-case ``type/subtype``; ``transfer_encoding`` the lower-case
    Content-Transfer-Encoding (``7bit`` when absent, RFC 2045 §6.1); ``headers`` every header of the part
    in order, names as spelt on the wire, folded values unfolded.
    """

    content_id: str | None
    content_type: str
    media_type: str
    charset: str | None
    transfer_encoding: str
    headers: tuple[tuple[str, str], ...]
    body: PartBody

    def header(self, name: str) -> str | None:
        """The first header called ``name`` (any case), or None."""
        wanted = name.lower()
        for key, value in self.headers:
            if key.lower() == wanted:
                return value
        return None

    @property
    def location(self) -> str:
        """``cid:<content_id>``, the error location of this part (empty without a Content-ID)."""
        return f"cid:{self.content_id}" if self.content_id else ""


@dataclass(frozen=True)
class MimePackage(Closing):
    """A parsed ebXML Message Package: the SOAP part (``start``) and the payload parts in order.

    ``warnings`` lists the deviations accepted in lenient mode (always empty in strict mode). The package
    owns the parts' temporary storage: call :meth:`close` (or use it as a context manager) when done.
    """

    start: MimePart
    attachments: tuple[MimePart, ...]
    warnings: tuple[Issue, ...]
    boundary: str

    @property
    def parts(self) -> tuple[MimePart, ...]:
        """The SOAP part followed by the attachments."""
        return (self.start, *self.attachments)

    def attachment(self, content_id: str) -> MimePart | None:
        """The attachment whose Content-ID is ``content_id``, or None.

        Accepts ``id``, ``<id>`` and the ``cid:`` URL form of a Manifest reference (RFC 2392 §2:
        percent-encoded).
        """
        wanted = content_id.strip()
        if wanted[:4].lower() == "cid:":
            wanted = unquote(wanted[4:])
        wanted = strip_angle(wanted)
        for part in self.attachments:
            if part.content_id == wanted:
                return part
        return None

    def close(self) -> None:
        """Release every part's content."""
        for part in self.parts:
            part.body.close()
