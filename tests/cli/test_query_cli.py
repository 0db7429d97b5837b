"""``wevent query`` against addresses that are not a worker: one line, exit 2."""

import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


def query(url):
    return subprocess.run([sys.executable, "-m", "wevent.cli", "query", "--url", url, "--stream", "s", "--from", "1",
                           "--to", "2"], capture_output=True, text=True, timeout=60)


def one_line_error(run, reason):
    assert run.returncode == 2 and run.stdout == "", (run.stdout, run.stderr)
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr, run.stderr
    assert reason in run.stderr, run.stderr


@pytest.mark.parametrize("url", ["worker:6066", "http://[bad", "ftp://worker"])
def test_a_url_that_is_no_web_address_is_one_line(url):
    one_line_error(query(url), "--url must be an http:// or https:// URL")


@pytest.mark.parametrize("status, body, reason", [
    (200, b"<html>hello</html>", "answered, but not with a query answer"),
    (200, b'{"answer": [1, 2]}', "answered, but not with a query answer"),
    (200, b'{"stream": "s", "from": 1, "to": 2, "slot": 3, "decay": 1, "mode": "A", "answer": ["x"], '
          b'"standard_error": [1]}', "answered, but not with a query answer"),
    (400, b"[1]", "the worker refused the query"),
])
def test_a_server_that_is_no_worker_is_one_line(status, body, reason):
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(status)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        one_line_error(query(f"http://127.0.0.1:{server.server_address[1]}"), reason)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
