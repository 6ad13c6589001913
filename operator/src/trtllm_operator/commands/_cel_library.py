"""The Kubernetes CEL library functions our CRD rules use, for cel-python (``trtllm-operator render``).

cel-python implements the CEL standard; the API server adds Kubernetes libraries
(k8s.io/apiserver@v0.34.4 ``pkg/cel/library``: ``quantity.go``, ``lists.go``) and cel-go's string
extensions (``format``, ``join``, ``lowerAscii``; cel-go ``ext/strings.go``). These are the same
functions with the same results for the inputs our rules give them, so the offline check refuses
exactly what the API server refuses (tests/unit/test_render_command.py runs the whole invalid corpus
through both). Each function receives and returns cel-python values (:mod:`celpy.celtypes`).
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from celpy import celtypes

from trtllm_operator.api.common import quantity_value


class Quantity:
    """A parsed Kubernetes quantity (exact decimal value)."""

    def __init__(self, value: Decimal) -> None:
        self.value = value


def _parse_quantity(text: str) -> Decimal:
    """The exact value of a quantity string; ``ValueError`` when it is not one (``isQuantity``)."""
    return quantity_value(text)


def is_quantity(text: Any) -> celtypes.BoolType:
    try:
        _parse_quantity(str(text))
    except (ValueError, InvalidOperation):
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def quantity(text: Any) -> Quantity:
    return Quantity(_parse_quantity(str(text)))


def compare_to(a: Quantity, b: Quantity) -> celtypes.IntType:
    return celtypes.IntType((a.value > b.value) - (a.value < b.value))


def is_greater_than(a: Quantity, b: Quantity) -> celtypes.BoolType:
    return celtypes.BoolType(a.value > b.value)


def is_less_than(a: Quantity, b: Quantity) -> celtypes.BoolType:
    return celtypes.BoolType(a.value < b.value)


def _format_value(value: Any, *, nested: bool = False) -> str:
    """cel-go ``%s``: strings as is (quoted inside lists), lists as ``["a", "b"]``, doubles shortest."""
    if isinstance(value, celtypes.BoolType):
        return "true" if value else "false"
    if isinstance(value, celtypes.StringType | str):
        return f'"{value}"' if nested else str(value)
    if isinstance(value, celtypes.DoubleType | float):
        number = float(value)
        return str(int(number)) if number.is_integer() else repr(number)
    if isinstance(value, celtypes.ListType | list):
        return "[" + ", ".join(_format_value(v, nested=True) for v in value) + "]"
    return str(value)


def format_string(template: Any, args: Any) -> celtypes.StringType:
    """cel-go ``<string>.format(<list>)`` for the verbs our messages use: ``%s``, ``%d``, ``%%``."""
    out, i, values = [], 0, list(args)
    text = str(template)
    while i < len(text):
        ch = text[i]
        if ch == "%" and i + 1 < len(text):
            verb = text[i + 1]
            i += 2
            if verb == "%":
                out.append("%")
            elif verb == "d":
                out.append(str(int(values.pop(0))))
            elif verb == "s":
                out.append(_format_value(values.pop(0)))
            else:
                raise ValueError(f"unsupported format verb %{verb}")
            continue
        out.append(ch)
        i += 1
    return celtypes.StringType("".join(out))


def list_sum(values: Any) -> celtypes.IntType | celtypes.DoubleType:
    """Kubernetes lists library ``sum()`` (integers or doubles)."""
    items = list(values)
    if any(isinstance(v, celtypes.DoubleType) for v in items):
        return celtypes.DoubleType(sum(float(v) for v in items))
    return celtypes.IntType(sum(int(v) for v in items))


def join(values: Any, separator: Any = "") -> celtypes.StringType:
    return celtypes.StringType(str(separator).join(str(v) for v in values))


FUNCTIONS: dict[str, Any] = {
    "isQuantity": is_quantity,
    "quantity": quantity,
    "compareTo": compare_to,
    "isGreaterThan": is_greater_than,
    "isLessThan": is_less_than,
    "format": format_string,
    "sum": list_sum,
    "join": join,
}
