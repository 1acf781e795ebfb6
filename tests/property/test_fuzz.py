"""The fuzz layer, quick profile: mutated inputs at every door of the MSH end in a documented outcome
within a linear work bound (:mod:`msh.faults.fuzz`); work grows linearly with the size of hostile inputs.

Hypothesis draws the seed, the mutations (through a random source it controls, so a failure shrinks and
replays) and feeds each target; work is counted in traced calls and lines, never in time. The long run is
``scripts/fuzz.py --minutes N``.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from msh.faults.fuzz import Mutator, OperationCounter, Target, seeds, targets
from msh.faults.hostile import _envelope

EXAMPLES = {"parse-strict": 150, "parse-lenient": 150, "capture": 150, "agreement": 40, "endpoint": 80}


@pytest.fixture(scope="module", params=list(EXAMPLES))
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    built = targets([request.param])[0]
    try:
        yield built
    finally:
        built.close()


def test_mutated_inputs_end_in_a_documented_outcome_within_the_work_bound(target: Target) -> None:
    pool = seeds(target.kind)
    assert pool, f"no seeds for {target.kind}"

    @settings(
        max_examples=EXAMPLES[target.name],
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(index=st.integers(0, len(pool) - 1), rng=st.randoms(use_true_random=False), rounds=st.integers(1, 4))
    def check(index: int, rng: random.Random, rounds: int) -> None:
        data, content_type = Mutator(rng).mutate(pool[index], pool, rounds)
        outcome = target.run(data, content_type)
        finding = target.finding(outcome, len(data))
        bound = target.ops_fixed + target.ops_per_byte * len(data)
        assert finding is None, (
            f"{target.name}: {finding} for {len(data)} bytes (Content-Type {content_type!r}): {outcome.kind}, "
            f"ops {outcome.ops} (bound {bound})\n{outcome.detail}"
        )

    check()


def test_every_seed_is_handled_as_documented(target: Target) -> None:
    for seed in seeds(target.kind):
        outcome = target.run(seed.data, seed.content_type)
        assert target.finding(outcome, len(seed.data)) is None, (seed.origin, outcome)


# -------------------------------------------------------------------- work grows linearly with the input


def _ops(build: Callable[[int], bytes], n: int) -> tuple[int, int]:
    from msh.ebms.message import ParseMode, parse_message
    from msh.errors import EbmsError

    data = build(n)
    counter = OperationCounter()
    with counter.counting():
        for mode in ParseMode:
            with contextlib.suppress(EbmsError):
                parse_message(data, 'text/xml; charset="UTF-8"', mode=mode).close()
    return counter.ops, len(data)


GROWING = {
    # schema errors among siblings: each error's location used to scan all its siblings
    "schema errors": lambda n: _envelope(
        body='<eb:Manifest eb:version="2.0">' + "<eb:Reference/>" * n + "</eb:Manifest>"
    ),
    # foreign elements in scope of many namespaces: each one used to be serialised with all of them
    "foreign elements": lambda n: _envelope(
        envelope_attributes="".join(f' xmlns:n{i}="urn:x:{i}"' for i in range(n // 2)) + ' xmlns:f="urn:f"',
        body="<f:x/>" * n,
    ),
    # attributes: each one used to be read by a search through all of them
    "attributes": lambda n: _envelope(header_attributes="".join(f' eb:a{i}="v"' for i in range(n))),
    # bad party ids among many siblings, read leniently
    "party ids": lambda n: _envelope().replace(
        b"<eb:PartyId>hostile</eb:PartyId>",
        b"<eb:PartyId>hostile</eb:PartyId>" + b"<eb:PartyId eb:type=''>x</eb:PartyId>" * n,
    ),
}


@pytest.mark.parametrize("kind", list(GROWING))
def test_work_grows_linearly_with_hostile_input(kind: str) -> None:
    # Up to the limits (256 children, namespaces or attributes): doubling the input at most about doubles
    # the work; past the limits the input is refused at once.
    small_ops, small_size = _ops(GROWING[kind], 60)
    large_ops, large_size = _ops(GROWING[kind], 240)
    growth = (large_ops / small_ops) / (large_size / small_size)
    assert growth < 1.6, f"{kind}: {small_ops} ops for {small_size} bytes, {large_ops} for {large_size} bytes"
    refused_ops, refused_size = _ops(GROWING[kind], 5000)
    assert refused_ops <= large_ops * 2, f"{kind}: past the limits, {refused_ops} ops for {refused_size} bytes"
