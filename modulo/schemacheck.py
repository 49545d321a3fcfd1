"""A fast yes/no JSON Schema check, exact for the schemas it accepts to compile.

``jsonschema`` walks a schema keyword by keyword through generic dispatch: about half a millisecond
for a TravelPlanner plan, on every iteration of the loop (plans rarely repeat, so the validation
memo seldom helps). :func:`compile_check` turns a Draft 2020-12 schema into nested closures that answer
only *valid or not*, with jsonschema's own semantics:

* the structural keywords (``type``, ``properties``, ``required``, ``additionalProperties``, ``items``,
  ``$ref`` to ``#/$defs/...``, ``allOf``, ``anyOf``) are checked natively; a type is checked by the
  validator's own type checker (``object``, ``array`` and ``string`` directly: the same ``isinstance``);
* the keywords that look at one value only (``enum``, ``const``, ``minimum``, ``pattern``, ``minItems``,
  ...) are checked by jsonschema itself, on a schema holding just those keywords;
* any other keyword (``oneOf``, ``not``, ``prefixItems``, ``patternProperties``, ``if``, the
  ``unevaluated*`` ones, a remote ``$ref``...) makes :func:`compile_check` return None: the caller then
  uses jsonschema for everything. Words jsonschema does not know (``title``, ``description``) are ignored,
  as jsonschema ignores them.

The caller uses the check as a fast path: *valid* skips jsonschema; *invalid* runs jsonschema to
explain the rejection (so the messages are jsonschema's, word for word).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jsonschema

Check = Callable[[Any], bool]

#: keywords checked natively (they reach into subschemas)
_STRUCTURAL = frozenset({"type", "properties", "required", "additionalProperties", "items", "$ref", "allOf", "anyOf"})
#: keywords that read the one value they sit on (no subschema): left to jsonschema, node by node
_LOCAL = frozenset(
    {
        "enum",
        "const",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "pattern",
        "minItems",
        "maxItems",
        "uniqueItems",
        "minProperties",
        "maxProperties",
        "dependentRequired",
    }
)
#: the type names whose jsonschema check is exactly one isinstance test
_PLAIN_TYPES: dict[str, type] = {"object": dict, "array": list, "string": str}


class _Unsupported(Exception):
    pass


def _always(value: Any) -> bool:
    return True


def _never(value: Any) -> bool:
    return False


def compile_check(schema: Mapping[str, Any] | bool) -> Check | None:
    """A function telling whether a value is valid under ``schema`` exactly as jsonschema's validator for
    it says, or None when the schema uses a keyword this module does not check (see the module docstring)."""
    if isinstance(schema, bool):
        return _always if schema else _never
    cls = jsonschema.validators.validator_for(schema)
    if cls is not jsonschema.Draft202012Validator:
        return None
    validator = cls(schema)
    try:
        return _Compiler(schema, validator).node(schema)
    except _Unsupported:
        return None


class _Compiler:
    def __init__(self, root: Mapping[str, Any], validator: Any) -> None:
        self.root = root
        self.validator = validator
        self.known = frozenset(type(validator).VALIDATORS)
        #: ``$ref`` target -> its check (a cell filled once compiled, so recursive schemas work)
        self.refs: dict[str, list[Check]] = {}

    def node(self, schema: Any) -> Check:
        if isinstance(schema, bool):
            return _always if schema else _never
        if not isinstance(schema, Mapping):
            raise _Unsupported
        words = self.known & schema.keys()
        if words - _STRUCTURAL - _LOCAL:
            raise _Unsupported
        checks: list[Check] = []
        if "$ref" in schema:
            checks.append(self.ref(schema["$ref"]))
        if "type" in schema:
            checks.append(self.type_check(schema["type"]))
        local = {k: schema[k] for k in words & _LOCAL}
        if local:
            checks.append(self.validator.evolve(schema=local).is_valid)
        if words & {"properties", "required", "additionalProperties"}:
            checks.append(self.object_check(schema))
        if "items" in schema:
            checks.append(self.items_check(schema["items"]))
        if "allOf" in schema:
            checks.extend(self.node(s) for s in schema["allOf"])
        if "anyOf" in schema:
            options = [self.node(s) for s in schema["anyOf"]]
            checks.append(lambda value: any(option(value) for option in options))
        if not checks:
            return _always
        if len(checks) == 1:
            return checks[0]
        return lambda value: all(check(value) for check in checks)

    def ref(self, target: Any) -> Check:
        if not isinstance(target, str) or not (target == "#" or target.startswith(("#/$defs/", "#/definitions/"))):
            raise _Unsupported
        cell = self.refs.get(target)
        if cell is None:
            cell = self.refs[target] = []
            if target == "#":
                schema: Any = self.root
            else:
                section, _, name = target[2:].partition("/")
                if "/" in name or "~" in name:
                    raise _Unsupported
                try:
                    schema = self.root[section][name]
                except (KeyError, TypeError):
                    raise _Unsupported from None
            cell.append(self.node(schema))
        return lambda value: cell[0](value)

    def type_check(self, names: Any) -> Check:
        names = [names] if isinstance(names, str) else names
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise _Unsupported
        plain = [_PLAIN_TYPES.get(n) for n in names]
        if len(names) == 1 and plain[0] is not None:
            kind = plain[0]
            return lambda value: isinstance(value, kind)
        is_type = self.validator.is_type
        return lambda value: any(is_type(value, n) for n in names)

    def object_check(self, schema: Mapping[str, Any]) -> Check:
        properties = schema.get("properties", {})
        required = schema.get("required", [])
        if not isinstance(properties, Mapping) or not isinstance(required, list):
            raise _Unsupported
        checks = {name: self.node(sub) for name, sub in properties.items()}
        extra = schema.get("additionalProperties", True)
        extra_check = self.node(extra)
        closed = extra is False

        def check(value: Any) -> bool:
            if not isinstance(value, dict):
                return True  # these keywords apply to objects only
            for name in required:
                if name not in value:
                    return False
            for name, item in value.items():
                known = checks.get(name)
                if known is not None:
                    if not known(item):
                        return False
                elif closed or not extra_check(item):
                    return False
            return True

        return check

    def items_check(self, items: Any) -> Check:
        each = self.node(items)

        def check(value: Any) -> bool:
            if not isinstance(value, list):
                return True  # applies to arrays only
            return all(each(item) for item in value)

        return check
