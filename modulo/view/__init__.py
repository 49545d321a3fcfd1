"""``modulo view``: a run or a sweep as a self-contained HTML trace viewer (or served live on 127.0.0.1)."""

from __future__ import annotations

import signal
from pathlib import Path

from .build import ViewFiles, ViewOptions, build_view

__all__ = ["ViewFiles", "ViewOptions", "build_view", "serve_view"]


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def serve_view(path: Path, options: ViewOptions, port: int) -> int:
    """Serve ``path``'s view on 127.0.0.1:``port`` with live refresh until Ctrl-C or SIGTERM. Exit code."""
    from .serve import make_server

    signal.signal(signal.SIGTERM, _interrupt)  # a terminated server cleans up like a Ctrl-C
    print(f"building the view of {path} ...", flush=True)
    try:
        server, live = make_server(path, options, port)
    except KeyboardInterrupt:
        return 130
    host, bound = server.server_address[:2]
    print(f"serving {path} on http://{host!s}:{bound}/ (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        live.close()
    return 0
