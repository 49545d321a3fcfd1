"""Versioned prompt templates.

Templates are Jinja2 files under ``prompts/`` named ``<namespace>/<role>.j2`` (for example
``travelplanner/direct.j2``, ``core/backprompt_all.j2``). The first line of each file declares its
version as a Jinja comment: ``{# version: 3 #}``. Every run records, for each template it used, the
id, the declared version and a short hash of the text, so that a silent edit is visible.

Lookup for a benchmark's role falls back from ``<benchmark>/<role>.j2`` to ``core/<role>.j2``; a
benchmark that ships its own templates (``Benchmark.template_dir``) is searched before ``prompts/``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

import jinja2
from jinja2.runtime import new_context

from .errors import PromptError
from .resources import resource_dir

T = TypeVar("T")

_VERSION = re.compile(r"^\{#\s*version:\s*([\w.\-]+)\s*#\}\s*\n?")


@dataclass(frozen=True)
class Template:
    id: str
    version: str
    sha: str
    source: str

    @property
    def label(self) -> str:
        """``id@version#sha`` as recorded in run records."""
        return f"{self.id}@{self.version}#{self.sha}"

    @classmethod
    def from_text(cls, template_id: str, text: str, version: str = "1") -> Template:
        """A template held in memory (no file): a benchmark's ``template(role)`` may return one."""
        return cls(id=template_id, version=version, sha=_sha(text), source=text)

    def render(self, **variables: Any) -> str:
        template, template_globals = _compiled(self.source)
        try:
            # what jinja2.Template.render does, with the template's globals read into a dict once: jinja
            # would read them from their chain of mappings twice for every render
            context = new_context(
                template.environment, template.name, template.blocks, variables, False, template_globals, None
            )
            try:
                text: str = template.environment.concat(template.root_render_func(context))
            except Exception:
                template.environment.handle_exception()  # raises it again, with the template's lines in the traceback
        except jinja2.TemplateError as exc:
            raise PromptError(f"template {self.id} failed to render: {exc}") from exc
        return _one_newline(text)


def _one_newline(text: str) -> str:
    """``text.strip() + "\n"``, with no copy of a text that is already so (a backprompt quotes the whole
    request: two copies of it per iteration otherwise)."""
    if len(text) > 1 and text[-1] == "\n" and not text[-2].isspace() and not text[0].isspace():
        return text
    return text.strip() + "\n"


@lru_cache(maxsize=512)
def _compiled(source: str) -> tuple[jinja2.Template, dict[str, Any]]:
    """The compiled template and its globals (the environment's: fixed once the environment is made)."""
    template = _env().from_string(source)
    return template, dict(template.globals)


#: type -> the names its class holds (methods and other class attributes): for an object of one of these
#: types, ``getattr(obj, name)`` of another name is ``obj[name]`` (see :func:`keyed`)
_KEYED: dict[type, frozenset[str]] = {dict: frozenset(dir(dict))}


def keyed(cls: type[T]) -> type[T]:
    """Register ``cls`` (a class decorator) as a dict whose instances read their keys as attributes too: no
    instance ``__dict__`` (``__slots__ = ()``), and a ``__getattr__`` that returns ``self[name]`` (or raises
    AttributeError for a missing key). Templates then read ``row.name`` as its key straight away, without the
    failed attribute lookup (an AttributeError raised and caught, per field read, per render) that Jinja's
    attribute-first rule costs; the class's own attributes (``row.items``, the method) still come first."""
    own = cls.__mro__[: cls.__mro__.index(dict)] if issubclass(cls, dict) else ()
    if not own or cls.__dictoffset__ or any("__getattribute__" in vars(k) for k in own):
        raise TypeError(f"{cls.__name__} is not a dict subclass without an instance __dict__ or a __getattribute__")
    _KEYED[cls] = frozenset(dir(cls))
    return cls


class _Environment(jinja2.Environment):
    def getattr(self, obj: Any, attribute: str) -> Any:
        """Jinja's ``obj.attribute`` (the attribute, else the item), with the answer given at once for a key
        of a plain dict or a :func:`keyed` dict that their class holds no attribute of that name for: the
        attribute lookup would fail, and ``obj[attribute]`` is then Jinja's answer."""
        names = _KEYED.get(type(obj))
        if names is not None and attribute not in names:
            try:
                return obj[attribute]
            except KeyError:
                pass  # a missing key: Jinja's own lookup says what it is (undefined)
        try:  # Jinja's first choice, the attribute (``loop.index``), read here without another call
            return getattr(obj, attribute)
        except AttributeError:
            return super().getattr(obj, attribute)  # Jinja's own fallbacks: the item, else undefined


@lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    return _Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)


def prompts_root() -> Path:
    return resource_dir("prompts")


@lru_cache(maxsize=256)
def load_template(template_id: str, root: Path | None = None) -> Template:
    """Load ``<root>/<template_id>.j2``; raise PromptError when missing or without a version line."""
    base = root or prompts_root()
    path = base / f"{template_id}.j2"
    if not path.is_file():
        raise PromptError(f"prompt template {template_id!r} not found (looked for {path})")
    text = path.read_text(encoding="utf-8")
    m = _VERSION.match(text)
    if not m:
        raise PromptError(f"prompt template {path} must start with a version line like '{{# version: 1 #}}'")
    body = text[m.end() :]
    return Template(id=template_id, version=m.group(1), sha=_sha(body), source=body)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:10]


ROLES = ("direct", "cot", "json", "reformulate")


def role_templates(namespace: str, roles: tuple[str, ...] = ROLES) -> dict[str, str]:
    """``{role: "<namespace>/<role>"}``: a benchmark's ``prompts`` when its templates follow the layout."""
    return {role: f"{namespace}/{role}" for role in roles}


@lru_cache(maxsize=512)
def resolve(namespace: str, role: str, root: Path | None = None) -> Template:
    """``<namespace>/<role>`` if it exists, else ``core/<role>``."""
    base = root or prompts_root()
    for tid in (f"{namespace}/{role}", f"core/{role}"):
        if (base / f"{tid}.j2").is_file():
            return load_template(tid, base)
    raise PromptError(f"no template for role {role!r} in {namespace!r} or core (under {base})")


@lru_cache(maxsize=512)  # asked for on every iteration; the lookup stats files (templates load once anyway)
def benchmark_template(namespace: str, role: str, *, named: str | None = None, own: Path | None = None) -> Template:
    """A benchmark's template for ``role``: the id ``named`` when given, else ``<namespace>/<role>`` then
    ``core/<role>``; each id looked for under ``own`` (the benchmark's template folder) first, then
    under the core's prompts/ folder."""
    roots = [root for root in (own, prompts_root()) if root is not None]
    ids = [named] if named else [f"{namespace}/{role}", f"core/{role}"]
    for tid in ids:
        for root in roots:
            if (root / f"{tid}.j2").is_file():
                return load_template(tid, root)
    where = " or ".join(str(r) for r in roots)
    raise PromptError(f"no template {' or '.join(repr(t) for t in ids)} for role {role!r} (under {where})")
