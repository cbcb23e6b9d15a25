"""Every catalog model gets numbers from the form's defaults as the page adapts them (its length cut to the model's
maximum, a pre-quantized checkpoint's own method): the adaptation rule (sizing.web.model_limits), applied by hand
here as calc_adapt.js applies it, never leaves a catalog model refused at the defaults."""

from __future__ import annotations

from typing import Any

from sitebuild import calculator_pages
from sizing import estimate, web
from sizing.errors import SizingError


def test_every_catalog_model_estimates_at_the_adapted_defaults() -> None:
    default = calculator_pages.default_config()
    refused: list[tuple[str, str]] = []
    models: list[dict[str, Any]] = web.catalog()["models"]
    assert len(models) >= 200
    for model in models:
        config = {**default, "model": model["id"]}
        if model["max_seq_length"] and config["max_seq_length"] > model["max_seq_length"]:
            config["max_seq_length"] = model["max_seq_length"]
        if model["method"]:
            config["method"] = model["method"]
        try:
            assert estimate(config).allocated_bytes > 0
        except SizingError as err:
            refused.append((model["id"], err.code))
    assert refused == []
