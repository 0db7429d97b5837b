"""``wevent query`` against addresses that are not a worker: one line, exit 2."""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.helpers import run_main


def one_line_error(capsys, url, reason):
    """`wevent query` of ``url``, in this process, refuses in one line saying ``reason``."""
    status, out, err = run_main(capsys, "query", "--url", url, "--stream", "s", "--from", "1", "--to", "2")
    assert status == 2 and out == "", (out, err)
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert reason in err, err


@pytest.mark.parametrize("url", ["worker:6066", "http://[bad", "ftp://worker"])
def test_a_url_that_is_no_web_address_is_one_line(capsys, url):
    one_line_error(capsys, url, "--url must be an http:// or https:// URL")


@pytest.mark.parametrize("status, body, reason", [
    (200, b"<html>hello</html>", "answered, but not with a query answer"),
    (200, b'{"answer": [1, 2]}', "answered, but not with a query answer"),
    (200, b'{"stream": "s", "from": 1, "to": 2, "slot": 3, "decay": 1, "mode": "A", "answer": ["x"], '
          b'"standard_error": [1]}', "answered, but not with a query answer"),
    (400, b"[1]", "the worker refused the query"),
])
def test_a_server_that_is_no_worker_is_one_line(capsys, status, body, reason):
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
        one_line_error(capsys, f"http://127.0.0.1:{server.server_address[1]}", reason)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
