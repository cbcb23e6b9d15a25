# Strict JSON text reading (no NaN/Infinity, no number past float range, no deep nesting) with one-line errors.
# Standard library only and no import from the rest of `sizing` but errors.py: embedded in the trial recipe.
from __future__ import annotations

import json
from typing import Any

from .errors import SizingError


def _no_constant(word: str) -> Any:
    raise SizingError("bad_json", f"{word} is not a JSON number", field=None, value=word)


def read_json(text: str | bytes, where: str = "the configuration", unique_keys: bool = False) -> Any:
    """Parse JSON text strictly: NaN/Infinity, numbers past float range, 4300+ digit integers and deep nesting
    are refused with one SizingError instead of a traceback or a silent infinity. unique_keys: a key written twice
    in the outermost object (a run configuration's field) is refused too; json keeps the last silently, so
    {"r": 8, ..., "r": 64} would run at 64 without a word. Nested objects keep that behaviour: a model's config.json
    is read by Transformers with json.load, duplicates and all."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise SizingError("not_utf8", f"{where} is not UTF-8 text (byte {exc.start})", field=None,
                              offset=exc.start) from None
    repeated: list[str] = []  # the keys set twice in the object closed last: the outermost one, once parsed

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: set[str] = set()
        twice: set[str] = set()
        for key, _ in items:
            (twice if key in seen else seen).add(key)
        repeated[:] = sorted(twice)
        return dict(items)

    try:
        data = json.loads(text, parse_constant=_no_constant, parse_float=_finite_float,
                          object_pairs_hook=pairs if unique_keys else None)
    except json.JSONDecodeError as exc:
        raise SizingError("bad_json", f"{where} is not valid JSON (line {exc.lineno}, column {exc.colno})",
                          field=None, line=exc.lineno, column=exc.colno) from None
    except SizingError:
        raise  # NaN, Infinity or a float past the range: already named (SizingError is a ValueError)
    except RecursionError:
        raise SizingError("bad_json", f"{where} is nested too deeply", field=None) from None
    except ValueError as exc:  # int() past sys.get_int_max_str_digits()
        raise SizingError("bad_json", f"{where} holds a number too long to read ({str(exc)[:60]})",
                          field=None) from None
    if isinstance(data, dict) and repeated:
        raise SizingError("duplicate_key", f"{where} sets {', '.join(k[:60] for k in repeated[:5])} more than once: "
                          "keep one value", field=repeated[0][:200], keys=[k[:200] for k in repeated[:5]])
    return data


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise SizingError("bad_json", f"the number {text[:40]} is beyond the float range", field=None, value=text[:40])
    return value
