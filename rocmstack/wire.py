"""The base of every report model: a report's shape on the wire, as the code that reads it back indexes it.

Reports are read back from files and from images rocmstack did not necessarily write. So the models are
open (keys beyond the ones named are kept as they are: a report carries tool output), strict (a wrong type
is a wrong report, never coerced) and frozen. A value that is only shown is a ``Scalar``: the renderers
escape and format whatever they get. What code indexes, iterates or compares has the type it needs.
Each producer owns the model of what it writes; ``validate`` composes them into its own report.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

Scalar = str | int | float | bool | None  # a value that is only shown: escaped and formatted, never indexed


class WireModel(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True, frozen=True)
