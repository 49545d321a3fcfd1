"""A fast yes/no JSON Schema check, exact for the schemas it accepts to compile.

``jsonschema`` walks a schema keyword by keyword through generic dispatch: about half a millisecond
for a TravelPlanner plan, on every iteration of the loop (plans rarely repeat, so the validation
memo seldom helps). :func:`compile_check` turns a Draft 2020-12 schema into generated Python functions that answer
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
        return _Compiler(schema, validator).compile()
    except _Unsupported:
        return None


#: a type whose jsonschema check is True for every value of exactly these Python types (a fast first test;
#: the validator's own check decides the rest: 3.0 is an integer, True is not)
_EXACT_TYPES: dict[str, tuple[type, ...]] = {"integer": (int,), "number": (int, float), "boolean": (bool,)}


class _Compiler:
    """Turns a schema into the source of one Python function per subschema (checks inlined where they are a
    single test) and executes it: plain code, no closures or generic dispatch at check time."""

    def __init__(self, root: Mapping[str, Any], validator: Any) -> None:
        self.root = root
        self.validator = validator
        self.known = frozenset(type(validator).VALIDATORS)
        #: ``$ref`` target -> the name of its function (named before it is compiled: recursive schemas work)
        self.refs: dict[str, str] = {}
        self.namespace: dict[str, Any] = {"_is_type": validator.is_type, "_always": _always, "_never": _never}
        self.sources: list[str] = []
        self.count = 0

    def compile(self) -> Check:
        name = self.function(self.root)
        exec("\n\n".join(self.sources), self.namespace)  # the source is built here, from the schema's shape
        check: Check = self.namespace[name]
        return check

    def constant(self, value: Any) -> str:
        """A name bound to ``value`` in the generated module."""
        self.count += 1
        name = f"_k{self.count}"
        self.namespace[name] = value
        return name

    def function(self, schema: Any) -> str:
        """The name of a function checking ``schema`` (compiled now)."""
        if isinstance(schema, bool):
            return "_always" if schema else "_never"
        self.count += 1
        name = f"_c{self.count}"
        self.define(name, schema)
        return name

    def test(self, schema: Any, var: str) -> str:
        """A Python expression that is True when ``var`` is valid under ``schema``."""
        if isinstance(schema, bool):
            return "True" if schema else "False"
        if isinstance(schema, Mapping):
            words = self.known & schema.keys()
            if words == {"type"}:
                return self.type_test(schema["type"], var)
            if words == {"$ref"}:
                return f"{self.ref(schema['$ref'])}({var})"
            if not words:
                return "True"
        return f"{self.function(schema)}({var})"

    def define(self, name: str, schema: Any) -> None:
        if not isinstance(schema, Mapping):
            raise _Unsupported
        words = self.known & schema.keys()
        if words - _STRUCTURAL - _LOCAL:
            raise _Unsupported
        body: list[str] = []
        if "$ref" in schema:
            body.append(f"if not {self.ref(schema['$ref'])}(v): return False")
        is_dict = False
        if "type" in schema:
            body.append(f"if not ({self.type_test(schema['type'], 'v')}): return False")
            is_dict = schema["type"] == "object"
        local = {k: schema[k] for k in words & _LOCAL}
        if local:
            body.append(f"if not {self.constant(self.validator.evolve(schema=local).is_valid)}(v): return False")
        if words & {"properties", "required", "additionalProperties"}:
            body.extend(self.object_lines(schema, is_dict))
        if "items" in schema:
            each = ["for x in v:", f"    if not ({self.test(schema['items'], 'x')}): return False"]
            if schema.get("type") != "array":  # else the type test before made sure
                each = ["if isinstance(v, list):", *(f"    {line}" for line in each)]
            body.extend(each)
        for sub in schema.get("allOf", []) if "allOf" in words else []:
            body.append(f"if not ({self.test(sub, 'v')}): return False")
        if "anyOf" in words:
            options = [self.test(sub, "v") for sub in schema["anyOf"]]
            body.append(f"if not ({' or '.join(f'({o})' for o in options) or 'False'}): return False")
        lines = [f"def {name}(v):", *(f"    {line}" for line in body), "    return True"]
        self.sources.append("\n".join(lines))

    def ref(self, target: Any) -> str:
        if not isinstance(target, str) or not (target == "#" or target.startswith(("#/$defs/", "#/definitions/"))):
            raise _Unsupported
        name = self.refs.get(target)
        if name is None:
            if target == "#":
                schema: Any = self.root
            else:
                section, _, key = target[2:].partition("/")
                if "/" in key or "~" in key:
                    raise _Unsupported
                try:
                    schema = self.root[section][key]
                except (KeyError, TypeError):
                    raise _Unsupported from None
            if isinstance(schema, bool):
                return "_always" if schema else "_never"
            self.count += 1
            name = self.refs[target] = f"_c{self.count}"
            self.define(name, schema)
        return name

    def type_test(self, names: Any, var: str) -> str:
        names = [names] if isinstance(names, str) else names
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise _Unsupported
        tests = []
        for n in names:
            plain = _PLAIN_TYPES.get(n)
            if plain is not None:
                tests.append(f"isinstance({var}, {plain.__name__})")
            elif n in _EXACT_TYPES:
                exact = " or ".join(f"type({var}) is {t.__name__}" for t in _EXACT_TYPES[n])
                tests.append(f"{exact} or _is_type({var}, {n!r})")
            else:
                tests.append(f"_is_type({var}, {n!r})")
        return " or ".join(f"({t})" for t in tests) or "False"

    def object_lines(self, schema: Mapping[str, Any], is_dict: bool) -> list[str]:
        properties = schema.get("properties", {})
        required = schema.get("required", [])
        if not isinstance(properties, Mapping) or not isinstance(required, list):
            raise _Unsupported
        if not all(isinstance(k, str) for k in (*properties, *required)):
            raise _Unsupported
        need = frozenset(required)
        extra = schema.get("additionalProperties", True)
        lines: list[str] = []
        if need:
            lines.append(f"if not {self.constant(need)} <= v.keys(): return False")
        for key, sub in properties.items():
            test = self.test(sub, f"v[{key!r}]")
            if test == "True":
                continue
            lines.append(
                f"if not ({test}): return False" if key in need else f"if {key!r} in v and not ({test}): return False"
            )
        names = self.constant(frozenset(properties))
        if extra is False:
            lines.append(f"if not v.keys() <= {names}: return False")
        elif extra is not True and not (isinstance(extra, Mapping) and not (self.known & extra.keys())):
            lines.append("for k, x in v.items():")
            lines.append(f"    if k not in {names} and not ({self.test(extra, 'x')}): return False")
        if not lines:
            return []
        if is_dict:  # the type test before made sure
            return lines
        return ["if isinstance(v, dict):", *(f"    {line}" for line in lines)]
