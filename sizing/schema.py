# The JSON Schema of a run configuration, generated from the contract table (docs/recipes/config.schema.json).
from __future__ import annotations

import json
from typing import Any

from .contract import BY_NAME, CONFLICTS, FIELDS, Conflict, Field

SCHEMA_PATH = "docs/recipes/config.schema.json"  # relative to the repository root


def _property(spec: Field) -> dict[str, Any]:
    """What parse_config accepts for one field; null everywhere, since null means "the default"."""
    out: dict[str, Any] = {"description": spec.doc[2]}
    if spec.type == "int":
        out.update({"type": ["integer", "null"], "minimum": int(spec.low or 0), "maximum": int(spec.high or 0)})
    elif spec.type == "float":
        out.update({"type": ["number", "null"], "minimum": spec.low, "maximum": spec.high})
    elif spec.type == "bool":
        out["type"] = ["boolean", "null"]
    elif spec.type == "object":
        out["type"] = ["object", "null"]
    elif spec.type == "targets":
        # a comma list is split and stripped, so it needs one name character; list items are taken as given
        out["anyOf"] = [{"type": "null"}, {"type": "string", "pattern": "[^,\\s]"},
                        {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}}]
    elif spec.choices:
        out["enum"] = [*spec.accepts(), None]
    else:
        # stripped, it must not be empty (or must be the field's pattern, around which only spaces may stand)
        out.update({"type": ["string", "null"],
                    "pattern": f"^\\s*(?:{spec.pattern})\\s*$" if spec.pattern else "\\S"})
    if spec.default is not None:
        out["default"] = spec.default
    if spec.rule is not None:
        out["x-sizing-rule"] = spec.rule  # a missing value is derived by this rule (sizing/config.py RULES)
    return out


def _conflict(rule: Conflict) -> dict[str, Any]:
    """`not` the combination: a `when` field left out (or null) counts as its default value."""
    props: dict[str, Any] = {rule.field: {"const": rule.value}}
    required = [rule.field]
    for name, allowed in rule.when:
        default = BY_NAME[name].default
        if default is not None and default in allowed:
            props[name] = {"enum": [*allowed, None]}
        else:
            props[name] = {"enum": list(allowed)}
            required.append(name)
    return {"not": {"properties": props, "required": required}, "description": rule.message}


def config_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) a configuration must meet for parse_config to take it."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "sizing run configuration",
        "description": "Generated from sizing/contract.py by `python -m sizing schema`; do not edit by hand. "
                       "A missing or null field takes its default (or the rule named in x-sizing-rule).",
        "type": "object",
        "additionalProperties": False,
        "properties": {spec.name: _property(spec) for spec in FIELDS},
        "anyOf": [{"required": ["model"], "properties": {"model": {"type": "string"}}},
                  {"required": ["model_config"], "properties": {"model_config": {"type": "object"}}}],
        "allOf": [_conflict(rule) for rule in CONFLICTS],
    }


def schema_text() -> str:
    """The committed file's exact text."""
    return json.dumps(config_schema(), indent=2, ensure_ascii=False) + "\n"
