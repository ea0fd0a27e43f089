#!/usr/bin/env python3
"""app.py - a small HTTP service that warms a data set in memory before it serves.

On start it builds APP_MIB MiB (default 256) of float64 samples from a fixed
seed and sorts them into an index: seconds of work, the same bytes every
time. Only then does it listen on APP_PORT (default 8080). GET / answers one
JSON line computed from the index (its checksum and percentiles), with how
long the imports and the warm-up took, when it ended, and how many requests
this process answered: a fork of a snapshot taken once warm answers at once, with the
source's warm-up time and counter, without warming again. GET /rank?x=V
answers how many samples are below V (a binary search of the index).
"""
import time

T_START = time.monotonic()  # before the imports: numpy's takes seconds in a cold sandbox

import http.server  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import socketserver  # noqa: E402
import urllib.parse  # noqa: E402

import numpy as np  # noqa: E402

IMPORT_S = time.monotonic() - T_START

MIB = int(os.environ.get("APP_MIB", "256"))
PORT = int(os.environ.get("APP_PORT", "8080"))


def warm(mib):
    """The data set: mib MiB of N(0, 1) samples from seed 26, sorted."""
    t0 = time.monotonic()
    rng = np.random.default_rng(26)
    data = rng.standard_normal(mib * (1 << 20) // 8)
    data.sort()
    summary = {
        "samples": int(data.size),
        "checksum": round(float(data.sum()), 6),
        "p01": round(float(data[int(data.size * 0.01)]), 6),
        "p50": round(float(data[data.size // 2]), 6),
        "p99": round(float(data[int(data.size * 0.99)]), 6),
    }
    return data, summary, time.monotonic() - t0


DATA, SUMMARY, WARM_S = warm(MIB)
WARMED_AT = time.time()
STATE = {"requests": 0}


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        STATE["requests"] += 1
        body = {"pid": os.getpid(), "requests": STATE["requests"],
                "import_s": round(IMPORT_S, 3), "warm_s": round(WARM_S, 3), "warmed_at": round(WARMED_AT, 3)}
        if url.path == "/":
            body.update(SUMMARY)
        elif url.path == "/rank":
            try:
                x = float(urllib.parse.parse_qs(url.query)["x"][0])
            except (KeyError, ValueError):
                self.send_error(400, "want /rank?x=NUMBER")
                return
            body["x"] = x
            body["below"] = int(np.searchsorted(DATA, x))
        else:
            self.send_error(404)
            return
        out = (json.dumps(body) + "\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, fmt, *args):
        pass  # one line per request would fill the console log


class Server(http.server.HTTPServer):
    def server_bind(self):
        # HTTPServer's own asks socket.getfqdn("0.0.0.0"): a reverse DNS lookup
        # that waits 10 s for resolvers a sandbox may not reach.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = "python-app", self.server_address[1]


SERVER = Server(("0.0.0.0", PORT), Handler)
print("imported in %.2f s, warmed %d MiB in %.2f s; listening on port %d since %.3f"
      % (IMPORT_S, MIB, WARM_S, PORT, time.time()), flush=True)
SERVER.serve_forever()
