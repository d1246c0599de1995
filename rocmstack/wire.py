"""The base of every report model: a report's shape on the wire, the one declaration its producer builds and
its readers read back.

Reports are read back from files and from images rocmstack did not necessarily write. So the models are
open (keys beyond the ones named are kept as they are: a report carries tool output), strict (a wrong type
is a wrong report, never coerced) and frozen. A value that is only shown is a ``Scalar``: the renderers
escape and format whatever they get. What code indexes, iterates or compares has the type it needs.
Each producer owns the model of what it writes and builds it with ``produce``, which refuses a key the
model does not declare: open for what is read, closed for what is written. ``validate`` composes the
models into its own report. Every report's verdict is a boolean ``passed`` beside a one-line ``verdict``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

from pydantic import BaseModel, ConfigDict

Scalar = str | int | float | bool | None  # a value that is only shown: escaped and formatted, never indexed


class WireModel(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    @classmethod
    def declared(cls) -> frozenset[str]:
        """Every top-level key this model names (by its wire spelling)."""
        return frozenset(f.alias or name for name, f in cls.model_fields.items())

    @classmethod
    def produce(cls, fields: Mapping[str, Any], *, over: Mapping[str, Any] | None = None) -> Self:
        """The report as its producer writes it: TypeError for a key this model does not declare (a
        producer's typo or a field nobody documented), ValidationError for a value of the wrong type.
        ``over``: a report read back (an image's, already checked) that ``fields`` are written over; only
        what this producer writes must be declared."""
        unknown = sorted(set(fields) - cls.declared())
        if unknown:
            raise TypeError(f"{cls.__name__} declares no field {', '.join(map(repr, unknown))}")
        return cls.model_validate({**(over or {}), **fields})

    def wire(self) -> dict[str, Any]:
        """The dict that is written: the keys given (a default never added), nested models as dicts, every
        value as given (no float made of an int, no NaN turned into null)."""
        return self.model_dump(by_alias=True, exclude_unset=True)
