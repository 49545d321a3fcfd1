"""What a model's ``check`` may reach: pure computation on the data it is given, nothing of the process.

A candidate runs in a sandbox worker (:mod:`modulo.sandbox`), and that worker holds modulo itself: the
benchmark bound with its data, the built-in critics, the whole problem (a witness, a gold answer) in
the frames that call ``check``. Unconfined, a candidate could import the built-in critic it stands for
(``from modulo.binding import bind_critics``), walk the call stack to the full problem, or read the
benchmark's data files, pass the gate with no logic of its own and be reported as an LLM-written critic.

So the code file is loaded with its own builtins (:func:`load_confined`): ``import`` admits only the
pure-computation modules of :data:`ALLOWED_MODULES` (through a view that hides their private and
module attributes, and the few functions that fetch attributes by name), and ``open``, ``eval``,
``exec``, ``compile``, ``globals``, ``locals``, ``vars``, ``breakpoint`` and ``input`` are gone;
``getattr`` and its kin refuse private and dunder names. Before anything runs, the code is read
(:func:`refusal`) for what the builtins cannot see: dunder attributes and names (``x.__class__``,
``__loader__``) and the attributes of frames, tracebacks and generators. The same rules hold at the
gate and in the generated plugin (both load through :func:`load_confined`). A guard for code an LLM
writes, not a kernel boundary (see the sandbox's own limits).
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import sys
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

#: the modules a candidate may import (and their submodules named here)
ALLOWED_MODULES = frozenset(
    {
        "bisect",
        "calendar",
        "cmath",
        "collections",
        "collections.abc",
        "copy",
        "datetime",
        "decimal",
        "fractions",
        "functools",
        "heapq",
        "itertools",
        "json",
        "math",
        "numbers",
        "operator",
        "re",
        "statistics",
        "string",
        "textwrap",
        "typing",
        "unicodedata",
    }
)
#: functions of allowed modules that fetch attributes by name or evaluate text (they would bypass the guard)
HIDDEN = frozenset({"attrgetter", "methodcaller", "Formatter", "get_type_hints", "ForwardRef"})
#: builtins a candidate does not get
REMOVED = ("open", "eval", "exec", "compile", "globals", "locals", "vars", "breakpoint", "input", "help")
#: attributes that lead from a value to the interpreter's frames (and so to every caller's variables)
FRAME_ATTRS = frozenset(
    {
        "f_back",
        "f_builtins",
        "f_code",
        "f_globals",
        "f_locals",
        "tb_frame",
        "tb_next",
        "gi_code",
        "gi_frame",
        "cr_code",
        "cr_frame",
        "ag_code",
        "ag_frame",
    }
)
#: dunder names a candidate may use as plain names
DUNDER_NAMES = frozenset({"__name__"})
REFUSED = "refused in the modulo sandbox: a critic's code may use only its arguments and " + ", ".join(
    sorted(m for m in ALLOWED_MODULES if "." not in m)
)


def refusal(code: str) -> str | None:
    """Why ``code`` may not run (a dunder or frame attribute, a dunder name), or None. Only parsed."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None  # (the caller says why the code does not parse)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private_attr(node.attr, dunder_only=True):
            return f"line {node.lineno}: the attribute {node.attr!r} is {REFUSED}"
        if isinstance(node, ast.Name) and node.id.startswith("__") and node.id not in DUNDER_NAMES:
            return f"line {node.lineno}: the name {node.id!r} is {REFUSED}"
    return None


def _private_attr(name: str, *, dunder_only: bool = False) -> bool:
    return name in FRAME_ATTRS or name.startswith("__" if dunder_only else "_")


def _view(module: ModuleType) -> Any:
    """An allowed module as a candidate sees it: its public functions and values, no modules, no private
    names. (The module is held by the class's closure, not by an attribute the candidate could read.)"""

    class ModuleView:
        __slots__ = ()

        def __getattr__(self, name: str) -> Any:
            if _private_attr(name) or name in HIDDEN:
                raise PermissionError(f"{module.__name__}.{name} is {REFUSED}")
            value = getattr(module, name)
            if isinstance(value, ModuleType):
                if value.__name__ in ALLOWED_MODULES:
                    return _view(value)
                raise PermissionError(f"the module {value.__name__} is {REFUSED}")
            return value

        def __setattr__(self, name: str, value: Any) -> None:
            raise PermissionError(f"changing a module is {REFUSED}")

        def __dir__(self) -> list[str]:
            return [n for n in dir(module) if not _private_attr(n)]

    ModuleView.__name__ = ModuleView.__qualname__ = f"module {module.__name__}"
    return ModuleView()


def _import(
    name: str,
    globals: Mapping[str, Any] | None = None,
    locals: Mapping[str, Any] | None = None,
    fromlist: Any = (),
    level: int = 0,
) -> Any:
    if level or name not in ALLOWED_MODULES:
        raise PermissionError(f"importing {'.' * level}{name} is {REFUSED}")
    __import__(name)
    return _view(sys.modules[name if fromlist else name.partition(".")[0]])


def _named(fn: Callable[..., Any]) -> Callable[..., Any]:
    def guarded(obj: Any, name: Any, *rest: Any) -> Any:
        if isinstance(name, str) and _private_attr(name):
            raise PermissionError(f"the attribute {name!r} is {REFUSED}")
        return fn(obj, name, *rest)

    guarded.__name__ = fn.__name__
    return guarded


def confined_builtins() -> dict[str, Any]:
    """The builtins of a candidate's code."""
    out = {k: v for k, v in vars(builtins).items() if k not in REMOVED}
    out["__import__"] = _import
    for fn in (getattr, hasattr, setattr, delattr):
        out[fn.__name__] = _named(fn)
    return out


def load_confined(path: str, name: str, sha256: str | None = None) -> ModuleType:
    """Execute the candidate's code file ``path`` as the module ``name`` with :func:`confined_builtins`,
    after :func:`refusal` read it (a PermissionError says why it may not run). ``sha256``: the hash of the
    code the gate admitted; a file that differs is refused (what runs is what was admitted)."""
    with open(path, "rb") as fh:
        data = fh.read()
    if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
        raise PermissionError(
            f"{path} is not the code the extraction gate admitted (its sha256 differs from the one recorded "
            "in the critic's provenance): an edited critic is no longer the gated one; extract it again"
        )
    code = data.decode("utf-8")
    why = refusal(code)
    if why is not None:
        raise PermissionError(why)
    module = ModuleType(name)
    module.__file__ = path
    module.__dict__["__builtins__"] = confined_builtins()
    exec(compile(code, path, "exec"), module.__dict__)
    sys.modules[name] = module
    return module
