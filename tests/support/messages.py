"""What a test asks of an error message: that it names the field it is about."""

from __future__ import annotations

import re


def names_a_mutated_field(message: str, done: list[tuple[str, str]]) -> bool:
    """Whether ``message`` names the path of one of the mutated fields: the whole path (``spec.a.b``:
    schema type/enum/range errors, strict decoding's unknown field, a required field removed or
    emptied below it) or, for a rule declared on an enclosing object (CEL ``x-kubernetes-validations``
    report the path of the object that declares them), that object's path *and* the field's name."""
    for _, path in done:
        if path in message:
            return True
        parts = path.split(".")
        field = parts[-1]
        for n in range(len(parts) - 1, 0, -1):
            if ".".join(parts[:n]) in message and re.search(rf"\b{re.escape(field)}\b", message):
                return True
    return False
