"""``msh demo --multihop``: three real ``msh serve`` processes (A, the intermediary, C) on free ports with
lossy proxies on both hops; the demo's own verdicts, and the DeliveryFailures A gets once C is stopped."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

MESSAGES, UNDELIVERABLE = 12, 2


@pytest.fixture(scope="module")
def demo() -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "msh.cli", "demo", "--multihop", "--messages", str(MESSAGES)]
    command += ["--undeliverable", str(UNDELIVERABLE), "--loss", "0.2"]
    # The demo bounds each of its waits; this bound only keeps a hung run from hanging the suite.
    return subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)


def test_every_message_goes_through_the_intermediary_exactly_once(demo: subprocess.CompletedProcess[str]) -> None:
    out = demo.stdout
    assert demo.returncode == 0, out + demo.stderr
    assert f"{MESSAGES}/{MESSAGES} delivered at A; {MESSAGES}/{MESSAGES} in C's inbox exactly once" in out
    assert f"{MESSAGES} with the payload byte for byte; 0 extra deliveries" in out
    assert "\nevery message delivered exactly once\n" in out
    # Each MSH's records: A's messages were forwarded by I (hop acknowledgment) and delivered (C's).
    assert re.search(rf"party A \(From party\): {MESSAGES} submitted, \d+ transmissions to I", out), out
    # Each message was delivered end to end; most were forwarded first, but when I's hop acknowledgment
    # is lost on the way back, C's end-to-end one may reach A before any copy is acknowledged by I.
    forwarded = re.search(rf"; (\d+) forwarded \(I's hop acknowledgment, actor nextMSH\), {MESSAGES} delivered", out)
    assert forwarded is not None and 0 < int(forwarded.group(1)) <= MESSAGES, out
    assert re.search(rf"intermediary I: +\d+ copies of {MESSAGES} messages from A stored and forwarded to C", out)
    assert re.search(rf"party C \(To party\): +{MESSAGES} received and delivered to the inbox", out), out
    assert re.search(r"hop A->I \(and C->I\): the proxy in front of I lost \d+ of \d+ flights", out), out


def test_once_c_is_stopped_a_gets_delivery_failures_from_the_intermediary(
    demo: subprocess.CompletedProcess[str],
) -> None:
    out = demo.stdout
    assert demo.returncode == 0, out + demo.stderr
    part_two = out[out.index("C stopped;") :]
    # ebMS2 §6.5.7: C never took them: severity Error; RefToMessageId names each of A's messages.
    failures = re.findall(
        r"^  (Error|Warning) DeliveryFailure, RefToMessageId (\S+@party-a\.example): ", part_two, re.M
    )
    assert [severity for severity, _ in failures] == ["Error"] * UNDELIVERABLE, part_two
    statuses = re.findall(
        r"^  (\S+@party-a\.example): failed after \d+ transmission\(s\); Error DeliveryFailure", part_two, re.M
    )
    assert sorted(statuses) == sorted(ref for _, ref in failures)
    assert (
        part_two.count(
            "I journaled sending it (its DeliveryFailure taken by A): Error; at A: forwarded (I acknowledged the hop), "
            "then failed"
        )
        == UNDELIVERABLE
    )
    assert f"result: {UNDELIVERABLE}/{UNDELIVERABLE} failed at A, {UNDELIVERABLE}/{UNDELIVERABLE} reported" in out
    assert "\nevery undeliverable message reported to A by a DeliveryFailure from the intermediary\n" in out
    assert "work folder kept" not in out


def test_the_report_reads_the_three_journals_and_finds_the_undeliverable_messages(
    demo: subprocess.CompletedProcess[str],
) -> None:
    from msh.analytics.needs import spark_missing

    out = demo.stdout
    assert demo.returncode == 0, out + demo.stderr
    if spark_missing() is not None:
        assert "delivery analytics skipped: " in out
        pytest.skip(f"Spark cannot run here: {spark_missing()}")
    analytics = out[out.index("delivery analytics (Spark):") :]
    assert len(re.findall(r"^  exported \d+ events of \S+'s journal to ", analytics, re.M)) == 3  # A, I and C
    # The messages sent after C stopped reached I but never C: the reconciliation lists exactly them.
    assert f"reconciliation of the journals: sent_not_received {UNDELIVERABLE}\n" in analytics, analytics
    assert f"sent but never received: the {UNDELIVERABLE} message(s) sent after C stopped, each failed at A" in out
    report = re.search(r"HTML report: (\S+)", analytics)
    assert report is not None and Path(report.group(1)).is_file()


def test_options_of_the_other_demos_are_refused_in_one_line() -> None:
    for args, message in (
        (["--undeliverable", "2"], "msh demo: error: --undeliverable is for the multi-hop demo; add --multihop"),
        (["--multihop", "--codec"], "msh demo: error: --codec and --multihop are two different demos"),
        (["--multihop", "--undeliverable", "0"], "msh demo: error: argument --undeliverable: 0 is too small"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "msh.cli", "demo", *args], capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 2 and done.stderr.startswith(message), done.stderr
        assert "Traceback" not in done.stderr
