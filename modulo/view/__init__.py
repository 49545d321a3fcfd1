"""``modulo view``: a run or a sweep as a self-contained HTML trace viewer (or served live on 127.0.0.1)."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from ..errors import ModuloError
from .build import DEFAULT_CHUNK_SIZE, DEFAULT_RESAMPLES, DEFAULT_SPLIT_ABOVE, ViewFiles, ViewOptions, build_view

__all__ = ["ViewFiles", "ViewOptions", "build_view", "view_main"]


def view_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="modulo view",
        description="Write a run (or a sweep) as one self-contained HTML page that opens from disk with no "
        "network: overview, problem list, each problem's iterations, verdict matrix, backprompts, plan diffs "
        "and LLM calls. --serve serves it on 127.0.0.1 and refreshes it while the run writes.",
    )
    p.add_argument("path", type=Path, metavar="RUN_DIR|SWEEP_DIR")
    p.add_argument("--out", type=Path, default=None, help="the HTML file to write (default: PATH/view.html)")
    p.add_argument("--serve", action="store_true", help="serve on 127.0.0.1 with live refresh instead of writing")
    p.add_argument("--port", type=int, default=8765, help="port for --serve (0: any free port; default 8765)")
    p.add_argument(
        "--split-above",
        type=int,
        default=DEFAULT_SPLIT_ABOVE,
        help=f"above this many problems, problem details go to chunk files in view-data/ next to the page "
        f"(default {DEFAULT_SPLIT_ABOVE})",
    )
    p.add_argument("--chunk-size", type=int, default=DEFAULT_CHUNK_SIZE, help="problems per chunk file")
    p.add_argument(
        "--resamples", type=int, default=DEFAULT_RESAMPLES, help=f"bootstrap resamples (default {DEFAULT_RESAMPLES})"
    )
    return p


def view_main(argv: list[str]) -> int:
    """``modulo view PATH [--serve]``. Exit code."""
    args = view_parser().parse_args(argv)
    if args.chunk_size < 1 or args.split_above < 0 or args.resamples < 0:
        print("modulo view: --chunk-size must be >= 1, --split-above and --resamples >= 0", file=sys.stderr)
        return 2
    options = ViewOptions(split_above=args.split_above, chunk_size=args.chunk_size, n_resamples=args.resamples)
    try:
        if args.serve:
            return _serve(args.path, options, args.port)
        view = build_view(args.path, args.out, options)
    except ModuloError as exc:
        print(f"modulo view: {exc}", file=sys.stderr)
        return 2
    extra = len(view.files) - 1
    print(f"{view.page}" + (f" (and {extra} more file(s) it links to)" if extra else ""))
    return 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _serve(path: Path, options: ViewOptions, port: int) -> int:
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
