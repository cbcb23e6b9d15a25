# sizing: how much GPU memory a LoRA / QLoRA / full fine-tuning step needs, and where the peak falls.
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .config import RunConfig, normalize, parse_config
from .errors import SizingError
from .estimate import Estimate, estimate

__version__ = "0.1.0"


def load_config(data: Mapping[str, Any]) -> RunConfig:
    """Validate a run configuration (the shared JSON contract) into a RunConfig."""
    return parse_config(data)


__all__ = ["Estimate", "RunConfig", "SizingError", "estimate", "load_config", "normalize"]
