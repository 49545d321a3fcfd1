"""A small plugin of hostile critics (and one honest one) for the sandbox tests.

Importing it registers the critics in-process; a sandbox worker imports it the same way."""

from __future__ import annotations

import os
import socket
import time
from typing import Any

from modulo import components
from modulo.critic import critic
from modulo.types import Problem, Verdict

SECRET_VAR = "MODULO_SANDBOX_TEST_SECRET"


@critic("sandbox_env", description="puts an environment variable in its feedback")
def read_env(problem: Problem, plan: Any) -> Verdict:
    return Verdict.fail(f"secret={os.environ.get(SECRET_VAR)!r} home={os.environ.get('HOME')}")


@critic("sandbox_socket", description="connects to 127.0.0.1:PORT named in the plan")
def open_socket(problem: Problem, plan: Any) -> Verdict:
    with socket.create_connection(("127.0.0.1", int(plan["port"])), timeout=2) as conn:
        conn.sendall(b"leak")
    return Verdict.ok()


@critic("sandbox_raw_socket", description="makes a socket by hand")
def raw_socket(problem: Problem, plan: Any) -> Verdict:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.connect(("127.0.0.1", int(plan["port"])))
    return Verdict.ok()


@critic("sandbox_loop", description="never returns")
def loop_forever(problem: Problem, plan: Any) -> Verdict:
    while True:
        pass


@critic("sandbox_sleep", description="sleeps forever")
def sleep_forever(problem: Problem, plan: Any) -> Verdict:
    time.sleep(10**6)
    return Verdict.ok()


@critic("sandbox_alloc", description="allocates without bound")
def allocate(problem: Problem, plan: Any) -> Verdict:
    chunks = []
    while True:
        chunks.append(bytearray(64 * 2**20))


@critic("sandbox_fork", description="forks")
def fork(problem: Problem, plan: Any) -> Verdict:
    if os.fork() == 0:
        time.sleep(10**6)
    return Verdict.ok()


@critic("sandbox_exit", description="exits the process")
def hard_exit(problem: Problem, plan: Any) -> Verdict:
    os._exit(3)


@critic("sandbox_system_exit", description="raises SystemExit")
def system_exit(problem: Problem, plan: Any) -> Verdict:
    raise SystemExit(0)


@critic("sandbox_mutate", description="changes the plan and passes it")
def mutate(problem: Problem, plan: Any) -> Verdict:
    plan["ok"] = True
    return Verdict.ok()


@critic("sandbox_wrong_type", description="returns a string")
def wrong_type(problem: Problem, plan: Any) -> Verdict:
    return "pass"  # type: ignore[return-value]


@critic("sandbox_write", description="writes, removes and renames by absolute path, and in its scratch directory")
def write_outside(problem: Problem, plan: Any) -> Verdict:
    import shutil

    action = plan["action"]
    if action == "scratch":  # relative paths land in the scratch directory, which is allowed
        with open("note.txt", "w") as fh:
            fh.write("ok")
        os.remove("note.txt")
        return Verdict.ok()
    target = plan["path"]
    if action == "open":
        with open(target, "a") as fh:
            fh.write("escaped")
    elif action == "os_open":
        os.close(os.open(target, os.O_WRONLY | os.O_CREAT))
    elif action == "remove":
        os.remove(target)
    elif action == "rename":
        os.rename(target, target + ".moved")
    elif action == "copy":
        shutil.copyfile(__file__, target)
    return Verdict.ok()


@critic("sandbox_proc", description="reads another process's environment or memory through /proc")
def read_proc(problem: Problem, plan: Any) -> Verdict:
    pid = os.getppid() if plan["pid"] == "parent" else int(plan["pid"])
    path = f"/proc/{pid}/{plan['file']}"
    if plan.get("link"):  # through a link in the scratch directory, whose name says nothing of /proc
        os.symlink(f"/proc/{pid}", "elsewhere")
        path = f"elsewhere/{plan['file']}"
    with open(path, "rb") as fh:
        return Verdict.fail(fh.read(4096).decode("latin-1"))


@critic("sandbox_honest", description="passes plans with ok=true")
def honest(problem: Problem, plan: Any) -> Verdict:
    if isinstance(plan, dict) and plan.get("ok") is True:
        return Verdict.ok()
    return Verdict.fail(f"problem {problem.id}: the plan is not ok", keys=sorted(plan or {}))


for _factory in (
    read_env,
    open_socket,
    raw_socket,
    loop_forever,
    sleep_forever,
    allocate,
    fork,
    hard_exit,
    system_exit,
    mutate,
    wrong_type,
    write_outside,
    read_proc,
    honest,
):
    components.critics.register(_factory.name, _factory, replace=True)
