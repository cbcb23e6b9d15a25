# The one error type of the package: a stable code, the offending field, parameters to translate.
from __future__ import annotations

from typing import Any


class SizingError(ValueError):
    """A refusal the user can act on.

    `code` is stable (the page translates it), `field` names the configuration field at fault
    (or None), `params` carries the values a translated message needs. `str(err)` is one line
    of English.
    """

    def __init__(self, code: str, message: str, field: str | None = None, **params: Any) -> None:
        super().__init__(message)
        self.code = code
        self.field = field
        self.params: dict[str, Any] = params
        self.message = message

    def __str__(self) -> str:
        where = f" [{self.field}]" if self.field else ""
        return f"{self.code}{where}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "field": self.field, "message": self.message, "params": self.params}
