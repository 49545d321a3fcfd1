"""``modulo view --serve``: the viewer on 127.0.0.1, rebuilt when the run writes, with live refresh.

The server keeps the view's files in memory. A page asks ``__version`` every two seconds; the answer is
a fingerprint of the run directories' record files (size and modification time). When it changed,
the view is rebuilt (at most once per ``min_interval`` seconds) and the page reloads itself, keeping
its place (the route lives in the URL's fragment).
"""

from __future__ import annotations

import json
import mimetypes
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from ..reports.load import RECORDS_FILE, RUN_FILE, SUMMARY_FILE, find_runs
from .build import ViewFiles, ViewOptions, build_view

WATCHED = (RUN_FILE, RECORDS_FILE, SUMMARY_FILE, "evaluation.json")


def fingerprint(root: Path) -> str:
    """Size and mtime of every watched file of every run under ``root`` (new runs in a sweep count too)."""
    parts = []
    for run in find_runs([root]):
        for name in WATCHED:
            try:
                st = (run / name).stat()
            except OSError:
                continue
            parts.append(f"{run}/{name}:{st.st_size}:{st.st_mtime_ns}")
    return str(abs(hash("|".join(parts))))


class LiveView:
    """The current files of a view, rebuilt on demand when the runs changed."""

    def __init__(self, root: Path, options: ViewOptions, min_interval: float = 1.0) -> None:
        self.root = root
        self.options = options
        self.min_interval = min_interval
        self._lock = threading.Lock()
        self._checked = 0.0
        self.view = self._build(fingerprint(root))

    def _build(self, version: str) -> ViewFiles:
        self.options.live, self.options.version = True, version
        return build_view(self.root, None, self.options)

    def current(self) -> ViewFiles:
        with self._lock:
            now = time.monotonic()
            if now - self._checked >= self.min_interval:
                self._checked = now
                version = fingerprint(self.root)
                if version != self.options.version:
                    self.view = self._build(version)
            return self.view


def make_server(root: Path, options: ViewOptions, port: int = 0) -> tuple[ThreadingHTTPServer, LiveView]:
    live = LiveView(root, options)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            view = live.current()
            path = unquote(urlsplit(self.path).path).lstrip("/")
            if path == "__version" or path.endswith("/__version"):
                self._send(200, "application/json", json.dumps({"version": live.options.version}).encode())
                return
            if path == "" or path.endswith("/"):
                path += view.main if path == "" else "view.html"
            body = view.files.get(path)
            if body is None:
                self._send(404, "text/plain; charset=utf-8", f"not found: {path}".encode())
                return
            kind = mimetypes.guess_type(path)[0] or "application/octet-stream"
            self._send(
                200, kind + ("; charset=utf-8" if kind.startswith("text/") or kind.endswith("script") else ""), body
            )

        def _send(self, code: int, kind: str, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    return server, live
