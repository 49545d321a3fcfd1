"""``modulo view --serve``: the viewer on 127.0.0.1, rebuilt when the run writes, with live refresh.

The server writes the view into a temporary directory and serves it from there. A page asks
``__version`` every two seconds; the answer is a fingerprint of the run directories' files (size and
modification time). When it changed, the view is rebuilt (see :meth:`LiveView.current`)
and the page reloads itself, keeping its place (the route lives in the URL's fragment).
"""

from __future__ import annotations

import json
import mimetypes
import shutil
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from ..errors import ConfigError
from ..reports.load import RECORDS_FILE, RUN_FILE, SUMMARY_FILE, find_runs
from .build import PAGE_NAME, ViewFiles, ViewOptions, build_view

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
    """The current build of a view (in a temporary directory), rebuilt on demand when the runs changed."""

    def __init__(self, root: Path, options: ViewOptions, min_interval: float = 1.0, build_factor: float = 2.0) -> None:
        self.root = root
        self.options = options
        self.min_interval = min_interval
        self.build_factor = build_factor
        self._lock = threading.Lock()
        self._next = 0.0
        self._took = 0.0
        self._dirs: list[Path] = []
        self.view = self._build(fingerprint(root))

    def _build(self, version: str) -> ViewFiles:
        start = time.monotonic()
        self.options.live, self.options.version = True, version
        out = Path(tempfile.mkdtemp(prefix="modulo-view-"))
        try:
            view = build_view(self.root, out / PAGE_NAME, self.options)
        except BaseException:
            shutil.rmtree(out, ignore_errors=True)
            raise
        self._dirs.append(out)
        while len(self._dirs) > 2:  # keep the previous build for requests still reading it
            shutil.rmtree(self._dirs.pop(0), ignore_errors=True)
        self._took = time.monotonic() - start
        return view

    def current(self) -> ViewFiles:
        """The current build; rebuilt first when the runs changed and the last build is old enough.

        A rebuild waits at least ``min_interval`` seconds and ``build_factor`` times as long as the last
        build took, so a large run being written costs at most a third of a core.
        """
        with self._lock:
            now = time.monotonic()
            if now >= self._next:
                version = fingerprint(self.root)
                if version != self.options.version:
                    self.view = self._build(version)
                self._next = time.monotonic() + max(self.min_interval, self.build_factor * self._took)
            return self.view

    def file(self, rel: str) -> Path | None:
        """The built file at ``rel`` (None when there is none, or when ``rel`` leaves the build)."""
        view = self.current()
        base = view.base.resolve()
        path = (base / (rel or view.main)).resolve()
        if not path.is_relative_to(base) or not path.is_file():
            return None
        return path

    def close(self) -> None:
        with self._lock:
            for d in self._dirs:
                shutil.rmtree(d, ignore_errors=True)
            self._dirs.clear()


def make_server(root: Path, options: ViewOptions, port: int = 0) -> tuple[ThreadingHTTPServer, LiveView]:
    live = LiveView(root, options)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            rel = unquote(urlsplit(self.path).path).lstrip("/")
            if rel == "__version" or rel.endswith("/__version"):
                live.current()
                self._send(200, "application/json", json.dumps({"version": live.options.version}).encode())
                return
            if rel.endswith("/"):
                rel += PAGE_NAME
            path = live.file(rel)
            if path is None:
                self._send(404, "text/plain; charset=utf-8", f"not found: {rel}".encode())
                return
            kind = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
            if kind.startswith("text/") or kind.endswith("javascript"):
                kind += "; charset=utf-8"
            self._send(200, kind, path.read_bytes())

        def _send(self, code: int, kind: str, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    try:
        server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    except OSError as exc:
        live.close()
        raise ConfigError(f"cannot listen on 127.0.0.1:{port}: {exc} (--port 0 picks a free port)") from exc
    return server, live
