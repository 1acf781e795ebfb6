#!/usr/bin/env python3
"""Memory and speed of the SOAP-with-attachments codec (msh.ebms.mime).

1. Writes a package with one large binary payload to disk with ``write_package`` (the payload is itself a
   file, streamed: nothing large is held in memory).
2. Parses it from the file with ``parse_message`` (strict: MIME, XML, schema, model) in a fresh Python
   process, so that process's peak RSS
   (``ru_maxrss``) is the interpreter plus the parser, and reads the attachment through, checking its
   SHA-256. Target: peak RSS under 100 MiB whatever the payload size.
3. Measures parse throughput for a ~2 KB package (packages/s, median of several rounds).

Exits with status 1 when the RSS target is missed or the payload comes back different.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from msh.ebms.mime import AttachmentSpec, PartBody, build_package, parse_package, write_package  # noqa: E402

MIB = 1024 * 1024
SOAP = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n'
    b'<SOAP:Envelope xmlns:SOAP="http://schemas.xmlsoap.org/soap/envelope/" '
    b'xmlns:eb="http://www.oasis-open.org/committees/ebxml-msg/schema/msg-header-2_0.xsd" '
    b'xmlns:xlink="http://www.w3.org/1999/xlink">'
    b'<SOAP:Header><eb:MessageHeader SOAP:mustUnderstand="1" eb:version="2.0">'
    b"<eb:From><eb:PartyId>urn:duns:123456789</eb:PartyId></eb:From>"
    b"<eb:To><eb:PartyId>urn:duns:912345678</eb:PartyId></eb:To>"
    b"<eb:CPAId>cpa-bench</eb:CPAId><eb:ConversationId>conv-1</eb:ConversationId>"
    b"<eb:Service>urn:services:bench</eb:Service><eb:Action>Send</eb:Action>"
    b"<eb:MessageData><eb:MessageId>mid-1@bench.example</eb:MessageId>"
    b"<eb:Timestamp>2026-01-01T00:00:00Z</eb:Timestamp></eb:MessageData>"
    b"</eb:MessageHeader></SOAP:Header><SOAP:Body>"
    b'<eb:Manifest eb:version="2.0"><eb:Reference xlink:href="cid:payload@bench.example"/></eb:Manifest>'
    b"</SOAP:Body></SOAP:Envelope>"
)


def rss_mib() -> float:
    """Peak resident set size of this process so far (ru_maxrss is KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / MIB if sys.platform == "darwin" else peak / 1024


def generate(package: Path, size: int, encoding: str) -> tuple[str, str]:
    """Write a payload file of ``size`` bytes and a package carrying it; return (Content-Type, sha256)."""
    payload = package.with_suffix(".payload")
    digest = hashlib.sha256()
    block = os.urandom(MIB)
    with payload.open("wb") as f:
        written = 0
        index = 0
        while written < size:
            chunk = (index.to_bytes(8, "big") + block[8:])[: size - written]
            f.write(chunk)
            digest.update(chunk)
            written += len(chunk)
            index += 1
    try:
        body = PartBody.from_path(payload)
        spec = AttachmentSpec("payload@bench.example", "application/octet-stream", body, encoding)
        with package.open("wb") as out:
            content_type = write_package(out, SOAP, [spec], start_id="soap@bench.example")
    finally:
        payload.unlink()
    return content_type, digest.hexdigest()


def child(path: str, content_type: str, expected: str) -> None:
    """The measured process: parse from the file, read the attachment through, report as JSON."""
    baseline = rss_mib()
    began = time.perf_counter()
    from msh.ebms.message import ParseMode, parse_message

    with open(path, "rb") as f:
        # The whole inbound path: MIME, hardened XML, schema validation (strict) and the header model.
        message = parse_message(f, content_type, mode=ParseMode.STRICT)
    try:
        parsed = time.perf_counter()
        digest = hashlib.sha256()
        body = message.payloads[0].body
        with body.open() as reader:
            while chunk := reader.read(MIB):
                digest.update(chunk)
        done = time.perf_counter()
        report = {
            "baseline_mib": baseline,
            "peak_mib": rss_mib(),
            "parse_s": parsed - began,
            "read_s": done - parsed,
            "payload_bytes": body.size,
            "in_memory": body.in_memory,
            "ok": digest.hexdigest() == expected,
        }
    finally:
        message.close()
    print(json.dumps(report))


def small_package_rate(rounds: int, per_round: int) -> tuple[int, list[float]]:
    """Parse a ~2 KB package ``per_round`` times per round; return (package size, packages/s per round)."""
    payload = b"<Order><Line>" + b"item " * 20 + b"</Line></Order>"
    spec = AttachmentSpec("payload@bench.example", "application/xml", PartBody.from_bytes(payload), "8bit")
    soap = SOAP + b" " * max(0, 1620 - len(SOAP))  # a SOAP part of about 1.6 KB: a 2 KB package in all
    content_type, package = build_package(soap, [spec], start_id="soap@bench.example")
    rates = []
    for _ in range(rounds):
        began = time.perf_counter()
        for _ in range(per_round):
            parse_package(package, content_type).close()
        rates.append(per_round / (time.perf_counter() - began))
    return len(package), rates


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=int, default=200, help="payload size in MiB (default 200)")
    parser.add_argument("--max-rss-mb", type=float, default=100.0, help="peak RSS target in MiB (default 100)")
    parser.add_argument("--rounds", type=int, default=7, help="rounds of the 2 KB benchmark (default 7)")
    parser.add_argument("--per-round", type=int, default=2000, help="2 KB packages parsed per round (default 2000)")
    parser.add_argument("--tmpdir", type=Path, default=None, help="where to write the package (default: system temp)")
    parser.add_argument("--keep", action="store_true", help="keep the generated package file")
    parser.add_argument(
        "--encoding",
        choices=("binary", "8bit", "base64", "quoted-printable"),
        default="binary",
        help="Content-Transfer-Encoding of the large payload (default binary)",
    )
    parser.add_argument("--child", nargs=3, metavar=("PATH", "CONTENT_TYPE", "SHA256"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0

    size = args.size_mb * MIB
    print("== msh.ebms.mime benchmark")
    workdir = Path(tempfile.mkdtemp(prefix="msh-bench-mime-", dir=args.tmpdir))
    package = workdir / "package.mime"
    failed = False
    try:
        began = time.perf_counter()
        content_type, expected = generate(package, size, args.encoding)
        wrote = time.perf_counter() - began
        total = package.stat().st_size
        print(f"large package: {args.size_mb} MiB payload ({args.encoding}), {total:,} bytes at {package}")
        print(f"  generate (payload file + write_package from it): {wrote:.2f} s")
        result = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--child", str(package), content_type, expected],
            check=True,
            capture_output=True,
            text=True,
        )
        report = json.loads(result.stdout.strip().splitlines()[-1])
        peak = report["peak_mib"]
        verdict = "PASS" if peak < args.max_rss_mb else "FAIL"
        failed |= verdict == "FAIL" or not report["ok"]
        print("  parse_message (strict: MIME + XML + schema + model) from the file in a fresh process:")
        print(f"    RSS after imports (before parsing): {report['baseline_mib']:8.1f} MiB")
        target = f"target < {args.max_rss_mb:g} MiB: {verdict}"
        print(f"    peak RSS (ru_maxrss)              : {peak:8.1f} MiB   {target}")
        print(
            f"    parse_message                     : {report['parse_s']:8.2f} s   "
            f"{total / report['parse_s'] / 1e6:8.1f} MB/s"
        )
        print(
            f"    read the attachment through       : {report['read_s']:8.2f} s   "
            f"{report['payload_bytes'] / report['read_s'] / 1e6:8.1f} MB/s (with SHA-256)"
        )
        overall = report["parse_s"] + report["read_s"]
        print(f"    parse + read through              : {overall:8.2f} s   {total / overall / 1e6:8.1f} MB/s")
        print(f"    attachment spilled to a temp file : {not report['in_memory']}")
        print(f"    payload bytes identical (SHA-256) : {report['ok']}")
    finally:
        if args.keep:
            print(f"  kept {package}")
        else:
            package.unlink(missing_ok=True)
            workdir.rmdir()

    size_small, rates = small_package_rate(args.rounds, args.per_round)
    print(
        f"small package ({size_small:,} bytes): median {statistics.median(rates):,.0f} packages/s "
        f"over {args.rounds} rounds of {args.per_round} (min {min(rates):,.0f}, max {max(rates):,.0f})"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
