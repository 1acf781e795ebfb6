"""Mutation fuzzing of the MSH's doors: the codec, raw-capture reading, the agreement loader, the endpoint.

Each :class:`Target` takes one input and returns an :class:`Outcome`; an outcome is *documented* when it
is one the MSH promises (the project's own error types, or for the endpoint: 200/202 with an ebXML
message or nothing, 4xx, or 500 with a SOAP Fault) and its work stayed within a bound that grows linearly
with the input: ``ops <= OPS_FIXED + OPS_PER_BYTE * len(input)``, where ``ops`` counts the Python
function calls and the calls into C made while the target ran (:class:`OperationCounter`, the same on
every machine and in every run, unlike time). Anything else is a *finding*: an exception of another type
(a bug: the sender would get a bare error), or work beyond the bound (a quadratic path).

Inputs come from seeds (``samples/``, ``../shared/interop`` when present, and messages built here)
changed by :class:`Mutator`: byte-level changes (flips, inserted, deleted and repeated ranges, splices of
two seeds) and structure-aware ones (an element repeated thousands of times, many namespace declarations
or attributes, another encoding or charset, a DOCTYPE, deep nesting, a broken MIME boundary or transfer
encoding, an odd Content-Type). The test suite runs a quick profile of it through hypothesis
(``tests/property/test_fuzz.py``); ``scripts/fuzz.py --minutes N`` runs it longer and writes a minimal
reproducer (:func:`minimise`) for every new finding.

The modules, one concern each (import the names below from :mod:`msh.faults.fuzz` itself):

* :mod:`~msh.faults.fuzz.counting`: :class:`OperationCounter` and the linear bound (:data:`OPS_FIXED`,
  :data:`OPS_PER_BYTE`);
* :mod:`~msh.faults.fuzz.outcomes`: :class:`Outcome` and :class:`Finding`;
* :mod:`~msh.faults.fuzz.targets`: :class:`Target` and :func:`targets`, the doors;
* :mod:`~msh.faults.fuzz.seeds`: :class:`Seed` and :func:`seeds`;
* :mod:`~msh.faults.fuzz.mutator`: :class:`Mutator`;
* :mod:`~msh.faults.fuzz.minimising`: :func:`minimise` and :func:`fingerprint`.
"""

from __future__ import annotations

from msh.faults.fuzz.counting import OPS_FIXED, OPS_PER_BYTE, OperationCounter
from msh.faults.fuzz.minimising import fingerprint, minimise
from msh.faults.fuzz.mutator import Mutator
from msh.faults.fuzz.outcomes import Finding, Outcome
from msh.faults.fuzz.seeds import Seed, seeds
from msh.faults.fuzz.targets import Target, targets

__all__ = [
    "OPS_FIXED",
    "OPS_PER_BYTE",
    "Finding",
    "Mutator",
    "OperationCounter",
    "Outcome",
    "Seed",
    "Target",
    "fingerprint",
    "minimise",
    "seeds",
    "targets",
]
