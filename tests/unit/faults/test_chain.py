"""msh.faults.chain: the multi-hop samples copied with free ports, loaded as ``msh serve`` loads them."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from cpa.loader import load
from msh.errors import ConfigurationError
from msh.faults.chain import Timings, make_chain
from msh.faults.pair import SAMPLES, substitute
from msh.runtime.config import load_settings


def test_the_chain_routes_a_to_c_through_the_intermediary_behind_the_proxies(tmp_path: Path) -> None:
    chain = make_chain(tmp_path, timings=Timings(retries=9, route_retries=7, route_retry_interval="PT2S"))
    a, i, c = (load_settings(p.config, env={}) for p in (chain.a, chain.i, chain.c))
    assert (a.server.port, i.server.port, c.server.port) == (chain.a.port, chain.i.port, chain.c.port)
    assert len({chain.a.port, chain.i.port, chain.c.port, chain.i_public_port, chain.c_public_port}) == 5
    i_url, c_url = f"https://127.0.0.1:{chain.i_public_port}/msh", f"https://127.0.0.1:{chain.c_public_port}/msh"
    assert [r.next_hop for r in a.routing.routes] == [i_url]
    assert [r.next_hop for r in c.routing.routes] == [i_url]
    assert [r.next_hop for r in i.routing.routes] == [c_url, f"https://127.0.0.1:{chain.a.port}/msh"]
    assert {r.retries for r in (*a.routing.routes, *i.routing.routes)} == {7}
    assert {r.retry_interval.to_timedelta() for r in i.routing.routes} == {timedelta(seconds=2)}
    # Each MSH keeps its store in the work folder; the intermediary is party to no agreement.
    assert [s.store.url for s in (a, i, c)] == [str(p.store) for p in (chain.a, chain.i, chain.c)]
    assert a.agreements.paths == c.agreements.paths == (chain.cpa,) and i.agreements.paths == ()
    # The route trusts the intermediary's certificate by file: the one the agreement names for C's endpoint.
    assert a.routing.routes[0].trusted == (str(SAMPLES / "keys" / "intermediary.cert.pem"),)
    cpa = load(chain.cpa)
    text = chain.cpa.read_text(encoding="utf-8")
    assert i_url in text and f"https://127.0.0.1:{chain.a.port}/msh" in text and "<tp:Retries>9</" in text
    assert cpa.cpaid == "cpa-demo-routed-a-c"
    assert chain.proxied_hops() == (
        (("127.0.0.1", chain.i_public_port), ("127.0.0.1", chain.i.port)),
        (("127.0.0.1", chain.c_public_port), ("127.0.0.1", chain.c.port)),
    )


def test_a_chain_without_proxies_is_reached_directly(tmp_path: Path) -> None:
    chain = make_chain(tmp_path, proxies=False)
    assert (chain.i_public_port, chain.c_public_port) == (chain.i.port, chain.c.port)
    with pytest.raises(ValueError, match="without proxies"):
        chain.proxied_hops()


def test_a_sample_that_changed_is_named_with_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"sample\.toml no longer contains 'port = 8090'"):
        substitute("port = 8091\n", {"port = 8090": "port = 1"}, tmp_path / "sample.toml")
    # One pass: a replacement is never replaced again.
    assert substitute("a b", {"a": "b", "b": "c"}, tmp_path / "x") == "b c"
