"""``scripts/bench_exchange.py``: the line under each run's CPU figures (the highest rate they allow), and the
CPU by thread."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from msh.threadnames import name_os_thread
from tests.support.scripts import load_script


def test_each_side_is_bound_by_one_core_and_both_by_the_machine() -> None:
    a, b, both = load_script("bench_exchange").ceilings(2.0, 1.0, 2)
    assert a == pytest.approx(500)  # 1,000 ms of one core / 2 ms per message
    assert b == pytest.approx(1000)
    assert both == pytest.approx(2 * 1000 / 3)  # two cores' 2,000 ms / (2 + 1) ms per message


def test_the_line_names_the_first_bound() -> None:
    script = load_script("bench_exchange")
    assert script.ceiling_text(4.0, 1.0).endswith("the first bound: A's process")
    cores = len(script.os.sched_getaffinity(0))
    if cores == 1:
        pytest.skip("one usable core: both sides together bind first whatever the figures")
    assert script.ceiling_text(1.0, 4.0).endswith("the first bound: B's process")
    assert script.ceiling_text(1.0, 1.0).endswith(f"the first bound: the {cores} cores") == (cores < 2)


def test_cpu_by_thread_is_grouped_by_the_part_of_the_msh_each_thread_is() -> None:
    script = load_script("bench_exchange")
    pid = 100
    before = {100: ("msh", 1.0), 101: ("msh-writer", 2.0), 102: ("msh-work_0", 0.5), 103: ("python", 0.0)}
    after = {
        100: ("msh", 1.5),
        101: ("msh-writer", 2.75),
        102: ("msh-work_0", 0.5),
        104: ("msh-work_1", 0.25),  # started during the run: all its CPU is the run's
        105: ("msh-amqp-send", 0.125),
    }  # 103 ended during the run: not counted
    parts = script.cpu_by_part(pid, before, after)
    assert parts == pytest.approx({"event loop": 0.5, "store writer": 0.75, "work pool": 0.25, "AMQP client": 0.125})
    assert script.parts_text(parts, 250) == "event loop 2.00, store writer 3.00, work pool 1.00, AMQP client 0.50"
    assert script.parts_text({}, 250) == "not read"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread CPU is read from Linux's /proc")
def test_thread_cpu_reads_each_thread_of_a_process_with_its_name() -> None:
    script = load_script("bench_exchange")
    started, release = threading.Event(), threading.Event()

    def named() -> None:
        name_os_thread("bench-probe")
        started.set()
        release.wait(10)

    thread = threading.Thread(target=named)
    thread.start()
    try:
        assert started.wait(10)
        threads = script.thread_cpu(os.getpid())
    finally:
        release.set()
        thread.join(10)
    assert os.getpid() in threads  # the main thread's id is the process's
    assert threads[thread.native_id][0] == "bench-probe"
    assert all(seconds >= 0 for _name, seconds in threads.values())
    assert script.thread_cpu(2**22 + 12345) == {}  # no such process
