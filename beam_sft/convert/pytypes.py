"""Tool parameters written as Python annotations (xLAM / APIGen) -> a JSON Schema object, one table.

xLAM's tools (Salesforce/xlam-function-calling-60k and the sets APIGen writes) give ``parameters``
not as JSON Schema but as a map, parameter name -> ``{"type": TEXT, "description", "default"?}``,
TEXT a Python annotation as docstrings write it (``"str"``, ``"List[int]"``, ``"Dict[str, Any]"``,
``"int, optional"``, ``"str, default='London'"``). ``parameters_schema`` turns the map into
``{"type": "object", "properties": {...}, "required": [...]}``:

- a parameter is required unless its type text says ``optional`` or gives a default, or its spec
  has a ``default`` (any value, ``""`` and null included); a ``"required": true|false`` in the spec
  (the dataset card's own example writes one) decides over that, and contradicting ``optional`` is
  ``bad_tool_definition`` (a ``required`` list is JSON Schema's, of an object parameter's members);
- ``description`` and ``default`` are kept as they are; a default written in the type text is read
  as a Python literal and kept as ``default`` (two defaults that differ are refused);
- keys that are JSON Schema's own (``enum``, ``items``, ``minimum``, ...) are kept beside the mapped
  type; any other key is refused, never dropped (an ``"optional": true`` the template cannot show
  would turn an optional parameter into a required one unsaid).

The type text, by ``TYPE_NAMES`` (names in any case, ``typing.`` prefix or not):

====================================================  =============================================
``str`` ``int`` ``float`` ``bool`` ``None``            ``string`` ``integer`` ``number`` ``boolean``
                                                      ``null`` (JSON Schema's own names read as they are)
``list`` ``List`` ``Sequence`` ``tuple`` ``set`` ...  ``{"type": "array"}`` (a set: ``uniqueItems``)
``List[X]`` ``Set[X]`` ``Tuple[X, ...]``              ``... "items": X``
``Tuple[X, Y]``                                       ``items`` X (or the list ``[X, Y]`` when they
                                                      differ), ``minItems``/``maxItems`` 2
``dict`` ``Dict`` ``Mapping`` ``object``              ``{"type": "object"}``
``Dict[str, V]``                                      ``... "additionalProperties": V``
``Any`` (or no type at all)                           ``{}``: any value, as the source says
``Optional[X]`` ``Union[X, Y]`` ``X | Y`` ``X or Y``  ``"type": [x, y]`` of plain types, else ``oneOf``
                                                      (disjoint members) or ``anyOf``
====================================================  =============================================

Anything else (``Callable``, ``function``, ``datetime``, ``np.ndarray``, ``Dict[int, str]``, a text
that is no annotation) has no JSON Schema type: the tool is refused (``bad_tool_definition``
naming the parameter and quoting the text), never guessed. A guess (``Callable`` as ``string``, as
some converters write) tells the model a type the data's author never wrote, and a schema without
a type would show the parameter as ``any`` with the one thing the source said about it lost.

>>> parameters_schema({"n": {"type": "int", "description": "How many."},
...                    "tags": {"type": "List[str], optional", "description": "Filters."}}, "tools[0].parameters")
{'type': 'object', 'properties': {'n': {'type': 'integer', 'description': 'How many.'}, 'tags': {'type': 'array', 'items': {'type': 'string'}, 'description': 'Filters.'}}, 'required': ['n']}
>>> type_schema("Dict[str, List[float]]")
({'type': 'object', 'additionalProperties': {'type': 'array', 'items': {'type': 'number'}}}, False, <no default>)
"""

from __future__ import annotations

import re
from typing import Any

from beam_sft.convert.literals import NOT_JSON, python_literal
from beam_sft.convert.rows import Rejection
from beam_sft.visible import KEY_CHARS, cut, quoted

# How deep a type text may nest (``List[List[...]]``): tools.MAX_SCHEMA_DEPTH is this bound, so a type
# this reads is never refused as too deep once it is a schema.
MAX_TYPE_DEPTH = 64


class _NoDefault:
    def __repr__(self) -> str:
        return "<no default>"


NO_DEFAULT: Any = _NoDefault()  # type_schema: the type text gives no default

# The one table of type names, lower-cased (``typing.`` taken off): a name -> its JSON Schema.
TYPE_NAMES: dict[str, dict] = {
    **{name: {"type": "string"} for name in ("str", "string")},
    **{name: {"type": "integer"} for name in ("int", "integer")},
    **{name: {"type": "number"} for name in ("float", "number")},
    **{name: {"type": "boolean"} for name in ("bool", "boolean")},
    **{name: {"type": "null"} for name in ("none", "nonetype", "null")},
    **{name: {"type": "array"} for name in ("list", "array", "sequence", "tuple")},
    **{name: {"type": "array", "uniqueItems": True} for name in ("set", "frozenset")},
    **{name: {"type": "object"} for name in ("dict", "mapping", "object")},
    "any": {},
}
_ARRAYS = ("list", "array", "sequence", "set", "frozenset")  # X[item]
_UNIONS = ("union", "optional")
# Keys of a parameter spec that are JSON Schema's own: kept beside the mapped type.
SCHEMA_KEYWORDS = frozenset({
    "enum", "const", "items", "properties", "additionalProperties", "format", "pattern", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength", "minItems", "maxItems",
    "uniqueItems", "examples", "example", "title", "nullable", "oneOf", "anyOf", "allOf"})
MAX_TYPE_CHARS = 1000  # a type text longer than this is no annotation (and a hostile one costs nothing)

_TOKEN_RE = re.compile(r"\s*(?:(?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)|(?P<punct>\.\.\.|[\[\],|]))")
_OPTIONAL_RE = re.compile(r"\s*optional\b", re.IGNORECASE)
_DEFAULT_RE = re.compile(r"\s*default\b\s*(?:[=:]|\bis\b)?\s*", re.IGNORECASE)


class Unmappable(ValueError):
    """A type text with no JSON Schema form (the message says why)."""


def is_json_schema(params: dict) -> bool:
    """Whether a tool's ``parameters`` are JSON Schema rather than xLAM's map: a ``type`` that is a
    type name (or a list of them), a ``$ref``, a union list, or ``properties`` of schemas. In the map
    every value is a spec: a parameter named ``type`` has an object there, one named ``properties``
    a spec whose ``type`` and ``description`` are text, never schemas.

    >>> is_json_schema({"type": "object"}), is_json_schema({"type": {"type": "str", "description": "Kind."}})
    (True, False)
    """
    properties = params.get("properties")
    return (isinstance(params.get("type"), (str, list)) or isinstance(params.get("$ref"), str)
            or any(isinstance(params.get(k), list) for k in ("anyOf", "oneOf", "allOf"))
            or isinstance(properties, dict) and all(isinstance(v, dict) for v in properties.values()))


def is_parameter_map(params: Any) -> bool:
    """Whether a tool's ``parameters`` are xLAM's map, as a reader of JSON Schema tools meets them (a
    set converted to the OpenAI shape with its maps kept): not JSON Schema, and every value a spec
    with a type text. Read as JSON Schema, such a map would show the model a tool without parameters."""
    return (isinstance(params, dict) and bool(params) and not is_json_schema(params)
            and all(isinstance(spec, dict) and isinstance(spec.get("type"), str) for spec in params.values()))


def parameters_schema(params: dict, where: str) -> dict:
    """xLAM's parameter map -> a JSON Schema object (the module's rules); ``bad_tool_definition``
    naming the parameter (``where.NAME``) when one cannot be expressed."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, spec in params.items():
        schema, needed = parameter_schema(spec, f"{where}.{cut(str(name), KEY_CHARS)}")
        properties[name] = schema
        if needed:
            required.append(name)
    return {"type": "object", "properties": properties, "required": required}


def parameter_schema(spec: Any, where: str) -> tuple[dict, bool]:
    """One parameter's ``(JSON Schema, required)``."""
    if not isinstance(spec, dict):
        raise Rejection("bad_tool_definition", f"{where} is {quoted(spec, 40)}, not a parameter spec "
                        "({type, description, default?})")
    unknown = [k for k in spec if k not in ("type", "description", "default", "required") and k not in SCHEMA_KEYWORDS]
    if unknown:
        raise Rejection("bad_tool_definition", f"{where} has the key {quoted(unknown[0], KEY_CHARS)}, which is "
                        "neither xLAM's (type, description, default, required) nor JSON Schema's")
    text = spec.get("type")
    if text is not None and not isinstance(text, str):
        raise Rejection("bad_tool_definition", f"{where}.type is {quoted(text, 40)}, not a type text")
    try:
        schema, optional, default = type_schema(text or "")
    except Unmappable as exc:
        raise Rejection("bad_tool_definition", f"{where}.type {quoted(text, 80)}: {exc}") from None
    except Rejection as exc:  # a default literal that breaks the JSON rule (a key twice, 1e-400)
        raise Rejection(exc.code, f"{where}.type: {exc.message}") from None
    if "description" in spec and not isinstance(spec["description"], (str, type(None))):
        raise Rejection("bad_tool_definition", f"{where}.description is not a string")
    if spec.get("description") is not None:
        schema["description"] = spec["description"]
    if "default" in spec:
        if default is not NO_DEFAULT and default != spec["default"]:
            raise Rejection("bad_tool_definition", f"{where} gives two defaults, {quoted(default, 40)} in its type "
                            f"and {quoted(spec['default'], 40)}")
        default = spec["default"]
    if default is not NO_DEFAULT:
        schema["default"] = default
    own = spec.get("required")
    if isinstance(own, list):  # JSON Schema's: the members an object parameter needs, not whether it is needed
        schema["required"], own = own, None
    for key in spec:
        if key in SCHEMA_KEYWORDS:
            if key in schema and schema[key] != spec[key]:
                raise Rejection("bad_tool_definition", f"{where}.{key} differs from what its type "
                                f"{quoted(text, 40)} says")
            schema[key] = spec[key]
    needed = (not optional and default is NO_DEFAULT) if own is None else own
    if not isinstance(needed, bool):
        raise Rejection("bad_tool_definition", f"{where}.required is {quoted(needed, 40)}, not true or false")
    if needed and optional:
        raise Rejection("bad_tool_definition", f"{where} is required, but its type says optional")
    return schema, needed


def type_schema(text: str) -> tuple[dict, bool, Any]:
    """``(JSON Schema, optional, default)`` of one type text (``NO_DEFAULT`` when it gives none);
    ``Unmappable`` when it has no JSON Schema form.

    >>> type_schema("str, optional, default='London'")
    ({'type': 'string'}, True, 'London')
    >>> type_schema("Callable[[float], float]")
    Traceback (most recent call last):
    ...
    beam_sft.convert.pytypes.Unmappable: 'Callable' has no JSON Schema type
    """
    if len(text) > MAX_TYPE_CHARS:
        raise Unmappable(f"a type text of {len(text)} characters is no annotation")
    parser = _Parser(text)
    optional, default = False, NO_DEFAULT
    if _DEFAULT_RE.match(text):  # "default='x'" and no type: any value, with that default
        return {}, optional, _default(text, _DEFAULT_RE.match(text).end())
    schema = parser.union(1) if text.strip() and not text.lstrip().startswith(",") else {}  # no type: any value
    while text[parser.pos:].strip():
        if not parser.take(","):
            raise Unmappable(f"{quoted(text[parser.pos:].strip(), 40)} is not part of an annotation")
        m = _OPTIONAL_RE.match(text, parser.pos)
        if m is not None:
            optional, parser.pos = True, m.end()
            continue
        m = _DEFAULT_RE.match(text, parser.pos)
        if m is None:
            raise Unmappable(f"{quoted(text[parser.pos:].strip(), 40)} is neither 'optional' nor a default")
        return schema, optional, _default(text, m.end())  # the default is the rest of the text
    return schema, optional, default


def _default(text: str, at: int) -> Any:
    """The default a type text writes from ``at`` to its end, read as a Python literal."""
    written = text[at:].strip()
    value = python_literal(written, "its default")
    if value is NOT_JSON:
        raise Unmappable(f"its default {quoted(written, 40)} is not a Python literal")
    return value


class _Parser:
    """A recursive reader of annotation text: ``Name``, ``Name[arg, ...]``, unions by ``|`` or ``or``."""

    def __init__(self, text: str):
        self.text = text
        self.pos = 0

    def peek(self) -> tuple[str, str] | None:
        m = _TOKEN_RE.match(self.text, self.pos)
        if m is None or m.end() == self.pos:
            return None
        return ("name", m["name"]) if m["name"] else ("punct", m["punct"])

    def take(self, punct: str) -> bool:
        m = _TOKEN_RE.match(self.text, self.pos)
        if m is not None and m["punct"] == punct:
            self.pos = m.end()
            return True
        return False

    def union(self, depth: int) -> dict:
        members = [self.atom(depth)]
        while True:
            token = self.peek()
            if token == ("punct", "|") or token == ("name", "or"):
                self.pos = _TOKEN_RE.match(self.text, self.pos).end()
                members.append(self.atom(depth))
            else:
                return _union(members)

    def atom(self, depth: int) -> dict:
        if depth > MAX_TYPE_DEPTH:
            raise Unmappable(f"it nests past {MAX_TYPE_DEPTH} deep")
        m = _TOKEN_RE.match(self.text, self.pos)
        if m is None or not m["name"]:
            raise Unmappable("it is not an annotation")
        self.pos = m.end()
        name = m["name"]
        key = name.lower().removeprefix("typing.")
        if key not in TYPE_NAMES and key not in _UNIONS:  # before its arguments: Callable[[int], str]
            raise Unmappable(f"{quoted(name)} has no JSON Schema type")
        args: list[dict | str] = []
        if self.take("["):
            args.append(self.arg(depth))
            while self.take(","):
                args.append(self.arg(depth))
            if not self.take("]"):
                raise Unmappable(f"the arguments of {quoted(name)} are not closed")
        return _generic(name, key, args)

    def arg(self, depth: int) -> dict | str:
        if self.take("..."):
            return "..."
        return self.union(depth + 1)


def _generic(name: str, key: str, args: list) -> dict:
    if key in _UNIONS:
        if not args or "..." in args or (key == "optional" and len(args) != 1):
            raise Unmappable(f"{quoted(name)} needs its member types")
        return _union([*args, {"type": "null"}] if key == "optional" else args)
    schema = dict(TYPE_NAMES[key])
    if not args:
        return schema
    if "..." in args and not (key == "tuple" and len(args) == 2 and args[1] == "..."):
        raise Unmappable("'...' is read only as Tuple[X, ...]")
    if key in _ARRAYS and len(args) == 1:
        return {**schema, "items": args[0]}
    if key == "tuple":
        if args[-1] == "...":
            return {**schema, "items": args[0]}
        same = all(a == args[0] for a in args)
        return {**schema, "items": args[0] if same else args, "minItems": len(args), "maxItems": len(args)}
    if key in ("dict", "mapping") and len(args) == 2:
        if args[0] not in ({"type": "string"}, {}):
            raise Unmappable(f"the keys of {quoted(name)} are not str (JSON object keys are text)")
        return {**schema, "additionalProperties": args[1]} if args[1] else schema
    raise Unmappable(f"{quoted(name)} does not take {len(args)} type argument(s)")


def _union(members: list[dict]) -> dict:
    """One schema of several: any value when one member is any; a list of plain types; ``oneOf`` when
    no value can match two members (each one type, none the same, not both integer and number:
    ``Optional[List[int]]``, which the template shows as a union); else ``anyOf``."""
    if len(members) == 1:
        return members[0]
    if any(m == {} for m in members):
        return {}
    if all(set(m) == {"type"} and isinstance(m["type"], str) for m in members):
        return {"type": list(dict.fromkeys(m["type"] for m in members))}
    kinds = [m.get("type") for m in members]
    if (all(isinstance(k, str) for k in kinds) and len(set(kinds)) == len(kinds)
            and not {"integer", "number"} <= set(kinds)):
        return {"oneOf": members}
    return {"anyOf": members}
