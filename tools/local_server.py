"""The built site (or any folder) over HTTP on 127.0.0.1, for as long as a ``with`` block runs.

Used by the PDF printer (tools/book_pdf.py), the speed benchmark (tools/site_speed.py) and the
browser tests (tests/support/site_probe.py). ``compress=True`` serves it as a compressing host
does: every body but a ``.gz`` file gzip-encoded.
"""
from __future__ import annotations

import contextlib
import functools
import gzip
import http.server
import io
import pathlib
import threading


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest's output clean
        pass


class _GzipHandler(_QuietHandler):
    """A host that compresses on the fly (Content-Encoding: gzip, Content-Length of the compressed body)."""

    def send_head(self):
        path = pathlib.Path(self.translate_path(self.path))
        if not path.is_file() or path.suffix == ".gz":
            return super().send_head()
        body = gzip.compress(path.read_bytes(), compresslevel=6)
        self.send_response(200)
        self.send_header("Content-Type", self.guess_type(str(path)))
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        return io.BytesIO(body)


@contextlib.contextmanager
def serve(folder, compress: bool = False):
    """Serve ``folder`` over HTTP on 127.0.0.1 (a free port) inside the block; yields its base URL."""
    handler = _GzipHandler if compress else _QuietHandler
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(folder)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
