#!/usr/bin/env python3
"""client.py T0_MS TIMEOUT_S PORT... - the first answer of each port, on the host.

For each PORT (a published port on 127.0.0.1), in a thread of its own:
GET / until it answers 200 (a port whose server is not listening yet closes
the connection, or is refused: tried again every 50 ms), then print one
line: PORT, the milliseconds from T0_MS (wall clock, ms since the epoch)
to that answer, the milliseconds the answering request itself took, and
the answer's JSON. Exits 1 if a port did not answer within TIMEOUT_S.
Only the standard library: it runs on the host, not in the image.
"""
import http.client
import json
import sys
import threading
import time


def first_answer(port, t0_ms, deadline, out):
    while time.time() < deadline:
        start = time.time()
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/")
            resp = conn.getresponse()
            body = resp.read()
            conn.close()
            if resp.status == 200:
                end = time.time()
                out[port] = (round(end * 1000 - t0_ms), round((end - start) * 1000),
                             json.loads(body))
                return
        except (OSError, http.client.HTTPException, ValueError):
            pass
        time.sleep(0.05)


def main():
    t0_ms, timeout = float(sys.argv[1]), float(sys.argv[2])
    ports = [int(p) for p in sys.argv[3:]]
    deadline = time.time() + timeout
    out = {}
    threads = [threading.Thread(target=first_answer, args=(p, t0_ms, deadline, out))
               for p in ports]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for p in ports:
        if p in out:
            first_ms, req_ms, body = out[p]
            print(p, first_ms, req_ms, json.dumps(body, sort_keys=True))
    missing = [p for p in ports if p not in out]
    if missing:
        sys.exit("no answer within %g s on port %s" % (timeout, " ".join(map(str, missing))))


if __name__ == "__main__":
    main()
