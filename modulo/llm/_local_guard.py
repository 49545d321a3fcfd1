"""Watchdog that runs llama.cpp's OpenAI-compatible server and dies with the process that started it.

Started by :class:`modulo.llm.local.LocalBackend` as ``python -P _local_guard.py PARENT_PID -- SERVER_ARGS``.
It runs ``llama_cpp.server`` in this very process, so there is no grandchild to leak, and two daemon
threads end the process with ``os._exit`` as soon as either

* standard input reaches end of file: the parent holds the only write end of that pipe, so it closes
  when the parent closes it on purpose or when the parent dies in any way (SIGKILL included); or
* the parent process id changes (the parent died and this process was re-parented), which also covers
  a forked copy of the parent still holding the pipe open.

Before the server starts, environment variables that the server would read as settings (``MODEL``,
``PORT``, ``API_KEY``, ``CACHE``, ...; its settings are pydantic-settings classes, matched without case)
are removed, so that only the command line given by the parent decides how it runs.

The module imports nothing from modulo (it runs outside the package, with ``-P`` so that its own
directory does not shadow other modules).
"""

from __future__ import annotations

import os
import runpy
import sys
import threading
import time

POLL_S = 0.25


def _exit_on_eof() -> None:
    try:
        while sys.stdin.buffer.read(4096):
            pass
    except (OSError, ValueError):
        pass
    os._exit(0)


def _exit_when_orphaned(parent_pid: int) -> None:
    while True:
        if os.getppid() != parent_pid:
            os._exit(0)
        time.sleep(POLL_S)


def _drop_settings_from_environment() -> None:
    from llama_cpp.server.settings import Settings  # type: ignore[import-not-found,unused-ignore]

    names = {name.lower() for name in Settings.model_fields} | {"host", "port", "config_file"}
    for key in list(os.environ):
        if key.lower() in names:
            del os.environ[key]


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[1] != "--":
        print("usage: _local_guard.py PARENT_PID -- LLAMA_SERVER_ARGS...", file=sys.stderr)
        return 2
    parent_pid = int(argv[0])
    if os.getppid() != parent_pid:  # the parent is already gone
        return 0
    threading.Thread(target=_exit_on_eof, name="eof-watch", daemon=True).start()
    threading.Thread(target=_exit_when_orphaned, args=(parent_pid,), name="parent-watch", daemon=True).start()
    _drop_settings_from_environment()
    sys.argv = ["llama_cpp.server", *argv[2:]]
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
