"""An agreement document as the loader reads it: its namespaces, elements and attributes in the CPP/A
namespace, and where a problem in it is (the path and line of a :class:`~cpa.errors.CpaProblem`, and how
many problems are reported at most)."""

from __future__ import annotations

from typing import Final, Protocol

from lxml import etree

from cpa.errors import CpaProblem
from cpa.model import CPPA_NS
from msh.xmlpath import Locator

__all__ = [
    "DS",
    "MAX_PROBLEMS",
    "NS",
    "TP",
    "XLINK",
    "ProblemSink",
    "capped",
    "local_name",
    "path_of",
    "text_of",
    "tp_attr",
    "tp_child",
    "tp_children",
    "tp_tag",
]

TP: Final = CPPA_NS
DS: Final = "http://www.w3.org/2000/09/xmldsig#"
XLINK: Final = "http://www.w3.org/1999/xlink"
#: The prefixes of the loader's ElementPath expressions.
NS: Final = {"tp": TP, "ds": DS}

#: Problems reported per agreement at most (a last one says how many more there were): a few hundred
#: errors all say the same (fix the first), and listing thousands would cost more than the load itself.
MAX_PROBLEMS: Final = 100


class ProblemSink(Protocol):
    """Where a problem found at ``element`` (or at its ``attribute``) is recorded."""

    def __call__(self, element: etree._Element, message: str, attribute: str | None = None) -> None: ...


def tp_tag(local: str) -> str:
    """The tag of the CPP/A element ``local`` (``{namespace}local``)."""
    return f"{{{TP}}}{local}"


def local_name(element: etree._Element) -> str:
    """The local name of ``element``."""
    return etree.QName(element).localname


def text_of(element: etree._Element | None) -> str:
    """The text of ``element`` without surrounding white space (empty for a missing element)."""
    return (element.text or "").strip() if element is not None else ""


def tp_attr(element: etree._Element, local: str) -> str | None:
    """The CPP/A attribute ``tp:local`` of ``element`` without surrounding white space, or None."""
    value = element.get(tp_tag(local))
    return value.strip() if value is not None else None


def tp_child(element: etree._Element, local: str) -> etree._Element | None:
    """The first CPP/A child element ``local`` of ``element``, or None."""
    return element.find(tp_tag(local))


def tp_children(element: etree._Element, local: str) -> list[etree._Element]:
    """Every CPP/A child element ``local`` of ``element``, in document order."""
    return element.findall(tp_tag(local))


def path_of(element: etree._Element, locator: Locator) -> str:
    """``/CollaborationProtocolAgreement/PartyInfo[1]/DeliveryChannel[2]``: local names, with a position
    where same-named siblings make one necessary (:class:`msh.xmlpath.Locator`: each parent's children are
    scanned once, however many problems there are)."""
    return "/" + "/".join(locator.steps(element))


def capped(problems: list[CpaProblem]) -> list[CpaProblem]:
    """At most :data:`MAX_PROBLEMS` problems, in document order, and a last one saying how many more."""
    ordered = sorted(problems, key=lambda p: p.line or 0)
    if len(ordered) <= MAX_PROBLEMS:
        return ordered
    rest = ordered[MAX_PROBLEMS:]
    more = CpaProblem(
        rest[0].source,
        rest[0].line,
        "",
        f"and {len(rest)} more problem(s) from here on, not listed (at most {MAX_PROBLEMS} are); fix these first",
    )
    return [*ordered[:MAX_PROBLEMS], more]
