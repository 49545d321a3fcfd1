"""Hydra's structured-config schema, derived mechanically from the typed configuration model.

:mod:`modulo.config` holds the one set of typed classes. Hydra's ConfigStore wants dataclasses of
the types OmegaConf knows, so :func:`hydra_schema` writes one dataclass per section from the
pydantic model's fields (names, defaults, types) and nothing by hand:

* ``str``, ``int``, ``float``, ``bool`` and ``Any`` stay as they are; ``X | None`` is ``Optional[X]``;
* a ``Literal`` of strings is ``str`` (the model checks the value and names the allowed ones);
* ``list``/``tuple`` are ``List``, ``dict`` is ``Dict`` (element types kept where OmegaConf has them);
* a nested section is its own derived dataclass;
* a section that folds extra keys into ``args`` (``benchmark``: a config group file lists the
  benchmark's arguments at the top of the node) is an open ``Dict[str, Any]``.

Typos and wrong types in a key Hydra knows fail at composition with the key's name; whatever
OmegaConf cannot express is checked by :meth:`modulo.config.ModuloConfig.from_dict` right after.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from typing import Any, Dict, List, Literal, Optional, Union  # noqa: UP035 - OmegaConf needs typing generics

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

_PLAIN = (str, int, float, bool)


def _hydra_type(annotation: Any) -> Any:
    """The OmegaConf-compatible type for a pydantic field annotation."""
    if annotation is Any or annotation in _PLAIN:
        return annotation
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if getattr(annotation, "folds_extra_keys", False):
            return Dict[str, Any]  # noqa: UP006
        return hydra_schema(annotation)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Literal:
        kinds = {type(a) for a in args}
        return kinds.pop() if len(kinds) == 1 and kinds <= set(_PLAIN) else Any
    if origin in (Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            inner = _hydra_type(rest[0])
            return inner if inner is Any else Optional[inner]  # noqa: UP045
        return Any
    if origin in (list, tuple):
        items = [a for a in args if a is not Ellipsis]
        element = _hydra_type(items[0]) if len(set(items)) == 1 else Any
        return List[element] if element in (*_PLAIN, Any) else List[Any]  # type: ignore[valid-type]  # noqa: UP006
    if origin is dict:
        value = _hydra_type(args[1]) if len(args) == 2 else Any
        return Dict[str, value]  # type: ignore[valid-type]  # noqa: UP006
    return Any


def hydra_schema(model: type[BaseModel]) -> type:
    """A dataclass with the fields, defaults and (OmegaConf-compatible) types of ``model``.

    Made afresh on every call, never cached: Hydra's Ray launcher sends the composed config (whose
    metadata names these classes) through cloudpickle < 3, which, on the way back, writes copies of
    ``dataclasses.MISSING`` into the fields of the very class objects the driver holds; a cached class
    then reads as a class whose every section defaults to MISSING, and each later run in the process
    failed at composition ("Cannot assign _MISSING_TYPE to Dict[str, Any]").
    """
    fields: list[tuple[str, Any, Any]] = []
    for name, info in model.model_fields.items():
        kind = _hydra_type(info.annotation)
        if info.default_factory is not None:
            factory = info.default_factory
            made: Any
            if dataclasses.is_dataclass(kind):
                made = kind
            elif kind == Dict[str, Any] and isinstance(factory, type) and issubclass(factory, BaseModel):  # noqa: UP006
                made = functools.partial(lambda f: f().model_dump(mode="json"), factory)
            else:
                made = functools.partial(lambda f: _plain(f()), factory)
            fields.append((name, kind, dataclasses.field(default_factory=made)))
        else:
            default = None if info.default is PydanticUndefined else _plain(info.default)
            if isinstance(default, (list, dict)):
                fields.append((name, kind, dataclasses.field(default_factory=functools.partial(_copy, default))))
            else:
                fields.append((name, kind, dataclasses.field(default=default)))
    return dataclasses.make_dataclass(f"{model.__name__}Schema", fields)


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, tuple):
        return list(value)
    return value


def _copy(value: Any) -> Any:
    import copy

    return copy.deepcopy(value)
