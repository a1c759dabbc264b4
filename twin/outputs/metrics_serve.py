"""The process that answers a live twin's scrapes (`twin.outputs.metrics.Server` starts it).

    python -m twin.outputs.metrics_serve FD OPENMETRICS_TYPE TEXT_TYPE

FD is the listening socket the twin's process bound (so a port in use is refused there,
before anything starts). The twin's process writes each exposition it renders to this
process's stdin as a frame: a line `<openmetrics bytes> <text bytes>`, then both bodies. A
scrape (GET /metrics) is answered the last frame, OpenMetrics when the scraper accepts it.
It stops at the end of its stdin (the twin's process stopped serving, or died).

A process of its own, importing nothing but the standard library: the twin's process plays
scenarios and simulates (holding the interpreter lock for long stretches) and is slow to be
scheduled on a loaded machine, while this one sleeps between scrapes, so the kernel runs it
as soon as a scrape arrives.
"""

from __future__ import annotations

import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, BinaryIO
from urllib.parse import urlsplit

OPENMETRICS = "application/openmetrics-text"


class Bodies:
    """The last frame: (body, content type), OpenMetrics (True) and text (False)."""

    def __init__(self, om_type: str, text_type: str) -> None:
        self.lock = threading.Lock()
        self.types = {True: om_type, False: text_type}
        self.bodies = {True: b"", False: b""}

    def get(self, openmetrics: bool) -> tuple[bytes, str]:
        """What a scrape is answered."""
        with self.lock:
            return self.bodies[openmetrics], self.types[openmetrics]

    def follow(self, frames: BinaryIO) -> None:
        """Keep the last frame of `frames` until its end."""
        while header := frames.readline():
            om, text = (int(n) for n in header.split())
            bodies = {True: frames.read(om), False: frames.read(text)}
            with self.lock:
                self.bodies = bodies


def handler(bodies: Bodies) -> type[BaseHTTPRequestHandler]:
    """GET /metrics: the last frame (as prometheus_client's own handler chooses a format)."""

    class Scrape(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if urlsplit(self.path).path != "/metrics":
                self.send_error(404)
                return
            body, kind = bodies.get(OPENMETRICS in self.headers.get("Accept", ""))
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: no line per scrape on stderr."""

    return Scrape


def main(argv: list[str]) -> int:
    """Serve the socket FD until stdin ends."""
    fd, om_type, text_type = int(argv[0]), argv[1], argv[2]
    listening = socket.socket(fileno=fd)
    bodies = Bodies(om_type, text_type)

    class Http(ThreadingHTTPServer):
        daemon_threads = True

    server = Http(listening.getsockname()[:2], handler(bodies), bind_and_activate=False)
    server.socket.close()
    server.socket = listening

    def follow() -> None:
        bodies.follow(sys.stdin.buffer)
        server.shutdown()

    threading.Thread(target=follow, daemon=True).start()
    server.serve_forever(poll_interval=0.2)
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
