"""SOAP-with-attachments packaging of ebXML messages (ebMS2 §2.1, [SOAPAttach], RFC 2387, RFC 2045/2046).

An ebXML Message Package is a ``multipart/related`` MIME body whose root part (the Header Container) is
the SOAP envelope and whose other parts are the payloads. This package reads and writes such packages as
*streams*: nothing ever holds a whole package in memory.

Reading (:func:`parse_package`)
    The body is read in chunks (64 KiB) into one bounded buffer; the delimiter ``CRLF--boundary`` is looked
    for across chunk edges; each part's content is decoded on the fly (base64, quoted-printable) and kept
    in memory up to :attr:`MimeLimits.spool_threshold` (and :attr:`MimeLimits.max_memory_bytes` for the
    whole package), beyond which it spills to one unnamed temporary file shared by the package. Every
    quantity an attacker controls is bounded by :class:`MimeLimits`; going over a bound is a
    :class:`~msh.errors.MimeProblemError`, never a crash or an unbounded allocation.

Writing (:func:`write_package`)
    The package is streamed to a binary output; attachment bodies are copied from their
    :class:`PartBody` in chunks (encoded on the fly) and never loaded whole.

Forwarding (:func:`replace_root_part`)
    An intermediary's copy of a received package: the root part's content replaced, every other byte
    (preamble, delimiters, other parts, epilogue) copied as received, in chunks.

Non-multipart ebXML messages (a bare SOAP envelope, ebMS2 §2.1.2) are not MIME packages and are handled by
the caller before this package is involved.

The modules, one concern each (import the names below from :mod:`msh.ebms.mime` itself):

* :mod:`~msh.ebms.mime.limits`: :class:`MimeLimits`, the bounds on what is read;
* :mod:`~msh.ebms.mime.body`: part bodies (:class:`PartBody`) and spooling to the temporary file;
* :mod:`~msh.ebms.mime.parts`: the parsed package (:class:`MimePackage`, :class:`MimePart`);
* :mod:`~msh.ebms.mime.headers`: header syntax (:func:`parse_content_type`, Content-IDs, boundaries);
* :mod:`~msh.ebms.mime.report`: strict and lenient mode;
* :mod:`~msh.ebms.mime.transfer_encoding`: Content-Transfer-Encoding decoders and encoders;
* :mod:`~msh.ebms.mime.scanner`: the streaming multipart scanner;
* :mod:`~msh.ebms.mime.reader`: :func:`parse_package` (strict and lenient mode are described there);
* :mod:`~msh.ebms.mime.writer`: :func:`write_package`, :func:`build_package` and :class:`AttachmentSpec`;
* :mod:`~msh.ebms.mime.splice`: :func:`replace_root_part`.
"""

from __future__ import annotations

from msh.ebms.mime.body import PartBody
from msh.ebms.mime.headers import PartInfo, parse_content_type
from msh.ebms.mime.limits import MimeLimits
from msh.ebms.mime.parts import MimePackage, MimePart
from msh.ebms.mime.reader import parse_package
from msh.ebms.mime.splice import replace_root_part
from msh.ebms.mime.writer import AttachmentSpec, build_package, write_package

__all__ = [
    "AttachmentSpec",
    "MimeLimits",
    "MimePackage",
    "MimePart",
    "PartInfo",
    "PartBody",
    "build_package",
    "parse_content_type",
    "parse_package",
    "replace_root_part",
    "write_package",
]
