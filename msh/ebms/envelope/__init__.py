"""The SOAP envelope codec: :class:`~msh.ebms.model.Envelope` <-> XML (ebMS2 §2.3, chapters 3-9).

:func:`read_envelope` builds the model from a parsed element. It is order-insensitive: element order is
the schema's business (strict mode validates first, lenient mode reports order slips as Warnings), so the
same reader serves both modes. What cannot become a model (a missing required element, a bad value) raises
an :class:`~msh.errors.EbmsError` whose ``location`` is an XPath in the style other MSHs report.
:func:`write_envelope` and :func:`serialise_envelope` go the other way and always produce schema-valid
XML in the schema's element order; they refuse (``ValueError``) what the reader accepts only for the
receiving MSH to refuse it, a SyncReply or AckRequested aimed at an actor the specification does not allow
(ebMS2 §4.3.1, §6.3.1.1).

The modules, one concern each (import the names below from :mod:`msh.ebms.envelope` itself):

* :mod:`~msh.ebms.envelope.reading`: :func:`read_envelope`, :func:`read_reply_address` and
  :func:`salvage_envelope`;
* :mod:`~msh.ebms.envelope.salvage`: what :func:`salvage_envelope` finds (:class:`SalvagedEnvelope`), the
  MessageHeader read field by field as written;
* :mod:`~msh.ebms.envelope.element_reader`: one reading pass and the rules every element shares
  (:data:`MAX_FOREIGN_ELEMENTS`);
* :mod:`~msh.ebms.envelope.header_reader`: the ebXML elements of the SOAP Header;
* :mod:`~msh.ebms.envelope.body_reader`: the ebXML elements of the SOAP Body, and the SOAP Fault;
* :mod:`~msh.ebms.envelope.quick_reader`: the common ebXML elements read in one pass when nothing in
  them needs judging (the detailed reader reads those that need it);
* :mod:`~msh.ebms.envelope.writing`: :func:`write_envelope` and :func:`serialise_envelope`;
* :mod:`~msh.ebms.envelope.datetimes`: xsd:dateTime values (:func:`parse_datetime`, :func:`format_datetime`);
* :mod:`~msh.ebms.envelope.names`: the Clark names of the elements and attributes.
"""

from __future__ import annotations

from msh.ebms.envelope.datetimes import format_datetime, parse_datetime
from msh.ebms.envelope.element_reader import MAX_FOREIGN_ELEMENTS
from msh.ebms.envelope.reading import read_envelope, read_reply_address, salvage_envelope
from msh.ebms.envelope.salvage import SalvagedEnvelope, SalvagedHeader, SalvagedParty
from msh.ebms.envelope.writing import serialise_envelope, write_envelope

__all__ = [
    "MAX_FOREIGN_ELEMENTS",
    "SalvagedEnvelope",
    "SalvagedHeader",
    "SalvagedParty",
    "format_datetime",
    "parse_datetime",
    "read_envelope",
    "read_reply_address",
    "salvage_envelope",
    "serialise_envelope",
    "write_envelope",
]
