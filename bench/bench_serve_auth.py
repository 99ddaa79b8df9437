"""What SASL and ACLs cost ``txnlog serve``, in one run: logins per second per mechanism, and
confluent-kafka produce (idempotent, acks=all) and read_committed consume through an open
server beside the same through a server with ``--users-file`` (SCRAM-SHA-256) and
``--acl-file``. Prints the figures and the ratios; never asserts.

    .venv/bin/python bench/bench_serve_auth.py [--records N] [--logins N]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_serve import produce_consume  # bench/ is on the path: run as a script
from confluent_kafka import Producer

from txn_log.log import Log
from txn_wire.codec import LENGTH, decode_response, encode_request

VALUE = b"v" * 100
TXNLOG = str(Path(sys.executable).with_name("txnlog"))
SASL = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "SCRAM-SHA-256",
    "sasl.username": "bench",
    "sasl.password": "bench-secret",
}


def start_server(path: Path, *extra: str) -> tuple[subprocess.Popen[str], int]:
    process = subprocess.Popen(
        [TXNLOG, "serve", str(path), "--port", "0", *extra], stdout=subprocess.PIPE, text=True
    )
    if process.stdout is None:
        raise SystemExit("no stdout")
    line = process.stdout.readline()
    return process, int(line.split("listening on ")[1].split()[0].rsplit(":", 1)[1])


def stop(process: subprocess.Popen[str]) -> None:
    os.kill(process.pid, signal.SIGTERM)
    process.wait(60)


def _request(sock: socket.socket, api_key: int, version: int, body: dict[str, Any]) -> Any:
    sock.sendall(encode_request(api_key, version, 1, body))
    (length,) = LENGTH.unpack(sock.recv(4, socket.MSG_WAITALL))
    return decode_response(api_key, version, sock.recv(length, socket.MSG_WAITALL))[1]


def plain_logins_per_s(port: int, logins: int) -> float:
    """Connections that log in with PLAIN and ask for Metadata, one after another."""
    started = time.perf_counter()
    for _ in range(logins):
        with socket.create_connection(("127.0.0.1", port)) as sock:
            _request(sock, 17, 1, {"mechanism": "PLAIN"})
            answer = _request(sock, 36, 2, {"auth_bytes": b"\0bench\0bench-secret"})
            if answer["error_code"]:
                raise SystemExit(f"login failed: {answer}")
            _request(sock, 3, 9, {"topics": [{"name": "bench"}]})
    return logins / (time.perf_counter() - started)


def scram_logins_per_s(port: int, logins: int) -> float:
    """confluent-kafka producers that log in with SCRAM-SHA-256 and fetch metadata."""
    started = time.perf_counter()
    for _ in range(logins):
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", **SASL})
        producer.list_topics("bench", timeout=30)
    return logins / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--logins", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    best: dict[str, tuple[float, float]] = {"open": (0.0, 0.0), "auth": (0.0, 0.0)}
    plain = scram = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        users = root / "users.json"
        users.write_text(json.dumps({"bench": {"password": "bench-secret"}}))
        acls = root / "acls.txt"
        acls.write_text(
            "User:bench topic bench Read allow\nUser:bench topic bench Write allow\n"
            "User:bench group bench Read allow\n"
        )
        options = {"open": (), "auth": ("--users-file", str(users), "--acl-file", str(acls))}
        for round_ in range(
            args.rounds
        ):  # alternate, keep each setup's best: the machine is shared
            for name, extra in options.items():
                path = root / f"{name}-{round_}"
                with Log.open(path) as log:
                    log.create_topic("bench", 1)
                process, port = start_server(path, *extra)
                try:
                    rates = produce_consume(port, args.records, SASL if extra else {})
                    if name == "auth" and round_ == 0:
                        plain = plain_logins_per_s(port, args.logins)
                        scram = scram_logins_per_s(port, args.logins)
                finally:
                    stop(process)
                best[name] = (max(best[name][0], rates[0]), max(best[name][1], rates[1]))
    (open_produce, open_consume), (auth_produce, auth_consume) = best["open"], best["auth"]
    print(f"records: {args.records} x {len(VALUE)} bytes, one partition; best of {args.rounds}")
    print(f"open server produce:        {open_produce:,.0f} records/s")
    print(f"SASL + ACLs produce:        {auth_produce:,.0f} records/s")
    print(f"open server consume:        {open_consume:,.0f} records/s")
    print(f"SASL + ACLs consume:        {auth_consume:,.0f} records/s")
    print(f"auth / open produce: {auth_produce / open_produce:.2f}")
    print(f"auth / open consume: {auth_consume / open_consume:.2f}")
    print(f"PLAIN logins (raw, with a Metadata): {plain:,.1f} /s")
    print(f"SCRAM-SHA-256 logins (confluent-kafka producer + metadata): {scram:,.1f} /s")


if __name__ == "__main__":
    main()
