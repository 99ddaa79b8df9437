"""``txnlog serve`` as a real subprocess, for the wire tests and the Kafka-mode demo: started on
port 0 (127.0.0.1) unless ``--listener`` options name its listeners, its ports read from its
stdout, stopped by its process id (SIGTERM, then SIGKILL if it hangs). ``stderr`` is a pipe
(the tests read it after the stop) or a file (a long run must not fill a pipe nobody reads)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

TXNLOG = str(Path(sys.executable).with_name("txnlog"))
START_TIMEOUT_S = 60
_LISTENER = re.compile(r"\S+:(\d+) \((\w+)\)")
"""One listener in the first banner line of a server started with ``--listener``:
``127.0.0.1:41234 (PLAINTEXT)``."""


@dataclass
class ServeProcess:
    path: Path
    process: subprocess.Popen[str]
    port: int
    banner: list[str]

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def listener_ports(self) -> dict[str, int]:
        """Security protocol → port, of a server started with ``--listener`` options."""
        return {protocol: int(port) for port, protocol in _LISTENER.findall(self.banner[0])}

    def stop(self, signum: int = signal.SIGTERM) -> int:
        """Signal the server by its pid and wait for it; SIGKILL if it does not stop."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signum)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=30)
        return self.process.returncode


def start_serve(path: Path, *extra: str, stderr: IO[Any] | int = subprocess.PIPE) -> ServeProcess:
    port_options = [] if "--listener" in extra else ["--port", "0"]
    process = subprocess.Popen(
        [TXNLOG, "serve", str(path), *port_options, *extra],
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )
    banner = []
    if process.stdout is None:
        raise RuntimeError("no stdout pipe")
    for _ in range(2):
        line = process.stdout.readline()
        if not line:
            err = process.stderr.read() if process.stderr else "(see its stderr file)"
            raise RuntimeError(f"txnlog serve exited: {err}")
        banner.append(line.strip())
    port = int(banner[0].split("listening on ")[1].split()[0].rsplit(":", 1)[1])
    return ServeProcess(path, process, port, banner)
