"""Paths of elements in a parsed document, for the ``location`` of errors (ebMS2 §4.2.3.2.5) and the
``path`` of agreement problems, in time linear in the document however many errors there are.

A path step is the element's local name, with a position (``PartyId[2]``) only where same-named siblings
make one necessary. Naively each step scans the element's siblings, so a document with thousands of
siblings and an error on each costs the square of its size (a 60 KB message took a minute); a
:class:`Locator` scans each parent's children once, on first need, and answers every later question about
them from that scan.
"""

from __future__ import annotations

from lxml import etree

__all__ = ["Locator"]


class Locator:
    """Answers path questions about the elements of one document (not thread-safe; one per use)."""

    __slots__ = ("_children", "_named", "_steps")

    def __init__(self) -> None:
        self._steps: dict[etree._Element, dict[etree._Element, str]] = {}
        self._children: dict[etree._Element, list[etree._Element]] = {}
        self._named: dict[etree._Element, dict[tuple[str | None, str], list[etree._Element]]] = {}

    def step(self, element: etree._Element) -> str:
        """``element``'s local name, with its position among same-named siblings when it has some."""
        parent = element.getparent()
        if parent is None:
            return etree.QName(element).localname
        steps = self._steps.get(parent)
        if steps is None:
            by_tag: dict[object, list[etree._Element]] = {}
            for child in parent:
                if isinstance(child.tag, str):
                    by_tag.setdefault(child.tag, []).append(child)
            steps = {}
            for same in by_tag.values():
                local = etree.QName(same[0]).localname
                if len(same) == 1:
                    steps[same[0]] = local
                else:
                    for index, child in enumerate(same, start=1):
                        steps[child] = f"{local}[{index}]"
            self._steps[parent] = steps
        return steps[element]

    def steps(self, element: etree._Element, *, below: etree._Element | None = None) -> list[str]:
        """The steps from the document root (or from just below ``below``) down to ``element``."""
        steps: list[str] = []
        current: etree._Element | None = element
        while current is not None and current is not below:
            steps.append(self.step(current))
            current = current.getparent()
        steps.reverse()
        return steps

    def element_children(self, parent: etree._Element) -> list[etree._Element]:
        """``parent``'s child elements (no comments or processing instructions), in document order."""
        children = self._children.get(parent)
        if children is None:
            children = [child for child in parent if isinstance(child.tag, str)]
            self._children[parent] = children
        return children

    def named_children(self, parent: etree._Element, prefix: str | None, local: str) -> list[etree._Element]:
        """``parent``'s child elements with local name ``local`` written with ``prefix`` (None: none)."""
        named = self._named.get(parent)
        if named is None:
            named = {}
            for child in self.element_children(parent):
                named.setdefault((child.prefix, etree.QName(child).localname), []).append(child)
            self._named[parent] = named
        return named.get((prefix, local), [])
