"""Reading manifests as ``kubectl apply -f`` reads them: one home for the commands that take them
(``render -f`` / ``--engine``, ``simulate --deployment``).

A path is a file, a directory (its ``.yaml``/``.yml``/``.json`` files, not recursively, as
``kubectl apply -f DIR``) or ``-`` (standard input, as ``kubectl apply -f -``); each file may hold
several YAML documents; a list (``kind: List``, what ``kubectl get -o yaml`` prints) is expanded into
its items as ``kubectl apply`` expands it (:func:`flatten`).
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path
from typing import Any

import yaml

from trtllm_operator.commands._schema import non_finite_errors
from trtllm_operator.utf8 import first_non_utf8

#: ``-f -`` / ``--engine -`` / ``--deployment -``: read standard input, as ``kubectl apply -f -`` does.
STDIN = "-"


#: Files of a directory given to ``-f``/``--engine`` that are read, as ``kubectl apply -f DIR`` reads
#: them (kubernetes/cli-runtime ``pkg/resource/builder.go`` ``FileExtensions``; not recursive, as
#: kubectl without ``-R``).
FILE_EXTENSIONS = (".json", ".yaml", ".yml")


class BadInputError(ValueError):
    """Input that cannot be read as kubectl would read it; the message names where and why."""


class _DuplicateKeyError(yaml.constructor.ConstructorError):
    """A mapping that holds one key twice; ``problem_mark`` is the second, ``first_line`` the first."""

    def __init__(self, key: Any, first: yaml.Mark, again: yaml.Mark) -> None:
        super().__init__(None, None, f"key {key!r} given twice", again)
        self.key = key
        self.first_line = first.line + 1
        self.line, self.column = again.line + 1, again.column + 1


class _Loader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a mapping holding one key twice, which PyYAML accepts (the last
    value wins) and ``kubectl apply`` refuses. Kubernetes API concepts, "Field validation"
    (https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation): with ``Strict``
    "The API server rejects the request with a 400 Bad Request error when it detects any unknown or
    duplicate fields", and "The default validation setting for kubectl is ``--validate=true``, which
    means strict server-side field validation"; the API reference documents the ``fieldValidation``
    parameter of every write alike ("Strict: This will fail the request with a BadRequest error if
    any unknown fields would be dropped from the object, or if any duplicate fields are present").
    A duplicate left by a merge-conflict resolution would otherwise pass the offline review and fail
    at apply (fresh-user trial 44 F23). Keys brought in by a YAML merge (``<<``) are not duplicates:
    an explicit key overrides a merged one, as the YAML merge type defines."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        """A plain scalar's tag as go-yaml v2 gives it where the two differ on numbers (:func:`go_number`)."""
        tag = super().resolve(kind, value, implicit)  # type: ignore[no-untyped-call]
        if (
            kind is not yaml.ScalarNode
            or not implicit[0]
            or tag not in (_INT_TAG, _FLOAT_TAG, _STR_TAG)
            or not value
            or value[0] not in "0123456789+-."
            or _SPECIAL_FLOAT.fullmatch(value)
        ):
            return tag
        number = go_number(value)
        return _STR_TAG if number is None else _INT_TAG if isinstance(number, int) else _FLOAT_TAG

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, yaml.Mark] = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node)
                if key in seen:
                    raise _DuplicateKeyError(key, seen[key], key_node.start_mark)
                seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


# Plain scalars that start like a number are numbers exactly when kubectl reads them as numbers.
# kubectl turns YAML into JSON with sigs.k8s.io/yaml over go-yaml v2, whose ``resolve`` (resolve.go,
# hint 'D'/'S'/'.') strips underscores, then takes ``strconv.ParseInt(plain, 0, 64)`` (0x, 0o, 0b and a
# leading 0 for octal), then ``ParseUint``, then, when ``yamlStyleFloat`` matches, ``ParseFloat`` — a
# float out of range (1e400) is an error there and the scalar stays a string — else a string. PyYAML's
# YAML 1.1 rules differ: ``1e1`` was a string (trial 52 #5), ``1:04`` the integer 64, ``0o17`` a string
# (trial 53 #3, #4). ``.inf``/``.nan``, booleans, null and timestamps keep PyYAML's resolution, as
# go-yaml's table of those words agrees.
_GO_INT = re.compile(r"([-+]?)(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)")
_GO_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?")
_SPECIAL_FLOAT = re.compile(r"[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)")
_INT_TAG, _FLOAT_TAG, _STR_TAG = (f"tag:yaml.org,2002:{t}" for t in ("int", "float", "str"))


def go_number(text: str) -> int | float | None:
    """The number go-yaml v2 reads ``text`` as (a plain scalar), or None when it stays a string."""
    plain = text.replace("_", "")
    match = _GO_INT.fullmatch(plain)
    if match:
        sign, body = match.groups()
        if body[:2].lower() in ("0x", "0o", "0b"):
            value = int(body, 0)
        else:
            value = int(body, 8) if body.startswith("0") and len(body) > 1 else int(body)  # 017: octal
        value = -value if sign == "-" else value
        if -(2**63) <= value < 2**63 or (not sign and 0 <= value < 2**64):  # ParseInt, then ParseUint
            return value
    if _GO_FLOAT.fullmatch(plain):
        number = float(plain)
        return None if math.isinf(number) else number  # ParseFloat's ErrRange: a string
    return None


def _construct_number(loader: _Loader, node: yaml.ScalarNode) -> Any:
    text = str(loader.construct_scalar(node))
    if _SPECIAL_FLOAT.fullmatch(text):
        return loader.construct_yaml_float(node)
    number = go_number(text)
    if number is None:  # an explicit !!int / !!float go-yaml would not read: PyYAML's reading
        return loader.construct_yaml_int(node) if node.tag == _INT_TAG else loader.construct_yaml_float(node)
    return float(number) if node.tag == _FLOAT_TAG else number


_Loader.add_constructor(_INT_TAG, _construct_number)
_Loader.add_constructor(_FLOAT_TAG, _construct_number)


def _not_yaml(where: str, text: str, exc: yaml.YAMLError) -> BadInputError:
    """One line naming the file (or ``standard input``), the line and column, and what is wrong;
    PyYAML's own message spans five lines and names ``"<unicode string>"``, not the file (fresh-user
    trial 44 F8: with ``-f DIR`` it did not say which file)."""
    if isinstance(exc, _DuplicateKeyError):
        return BadInputError(
            f"{where}: line {exc.line}, column {exc.column}: key {exc.key!r} is given twice in one "
            f"mapping (lines {exc.first_line} and {exc.line}): kubectl apply refuses duplicate fields "
            "(strict field validation, its default); keep one"
        )
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        problem = exc.problem or "cannot be parsed"
        context = f" ({exc.context})" if exc.context else ""
        return BadInputError(
            f"{where}: line {mark.line + 1}, column {mark.column + 1}: not valid YAML: {problem}{context}"
        )
    if isinstance(exc, yaml.reader.ReaderError):
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        return BadInputError(f"{where}: line {line}, column {column}: not valid YAML: {exc.reason}")
    return BadInputError(f"{where}: not valid YAML: {' '.join(str(exc).split())}")


def _read_text(where: str) -> str:
    """The file ``where`` as text. Raises :class:`BadInputError` when it is not UTF-8 (a Latin-1 byte, a
    UTF-16 file such as PowerShell's ``>`` writes, a binary file): one line naming the file, the line
    and the first byte that is not, instead of a ``UnicodeDecodeError`` traceback (fresh-user trial 45
    A17). kubectl reads manifests as UTF-8 too."""
    try:
        return Path(where).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        bad = first_non_utf8(Path(where))
        if bad is None:  # pragma: no cover - the file changed between the two reads
            raise
        raise BadInputError(
            f"{where}: {bad}: a manifest is UTF-8 YAML, as kubectl reads it; save the file as UTF-8"
        ) from None


def texts(path: str) -> list[tuple[str, str]]:
    """(where, text) of each file ``path`` names: standard input, a directory's files, or the file.
    Raises :class:`OSError` when a file cannot be read, :class:`BadInputError` when one is not UTF-8."""
    if path == STDIN:
        return [("standard input", sys.stdin.read())]
    if Path(path).is_dir():
        files = sorted(p for p in Path(path).iterdir() if p.is_file() and p.suffix in FILE_EXTENSIONS)
        return [(str(p), _read_text(str(p))) for p in files]
    return [(path, _read_text(path))]


def flatten(doc: dict[str, Any], where: str) -> list[tuple[str, dict[str, Any]]]:
    """``doc``, or the objects of a list (what ``kubectl get -o yaml`` prints: ``kind: List``,
    ``items: [...]``) as ``kubectl apply`` expands it: kubernetes/cli-runtime@v0.34.4
    ``pkg/resource/visitor.go`` ``FlattenListVisitor`` (``kubectl apply`` builds with ``Flatten()``,
    kubectl@v0.34.4 ``pkg/cmd/apply/apply.go``) expands every object that ``meta.IsListType`` calls a
    list — for the unstructured objects apply decodes, any object whose ``items`` is an array
    (apimachinery@v0.34.4 ``Unstructured.IsList``), whatever its kind —, lists inside lists too; an
    item with neither ``apiVersion`` nor ``kind`` takes the list's ``apiVersion`` and its kind less the
    ``List`` suffix (``unstructuredJSONScheme.decodeToList``). An item that is not an object is an error
    (:class:`BadInputError`), as there. Returns (where, object) pairs; ``where`` names the item
    (``standard input: items[1]``)."""
    items = doc.get("items")
    if not isinstance(items, list):
        return [(where, doc)]
    api_version, kind = doc.get("apiVersion"), str(doc.get("kind") or "")
    out: list[tuple[str, dict[str, Any]]] = []
    for i, item in enumerate(items):
        at = f"{where}: items[{i}]"
        if not isinstance(item, dict):
            raise BadInputError(
                f"{at} is not an object (a {type(item).__name__}): a list's items are manifests"
            )
        typed = item
        if "apiVersion" not in item and "kind" not in item:
            typed = {"apiVersion": api_version, "kind": kind.removesuffix("List"), **item}
        out += flatten(typed, at)
    return out


def read_objects(path: str) -> list[tuple[str, dict[str, Any]]]:
    """The objects in ``path`` (a file, a directory as ``kubectl apply -f DIR`` reads it, or ``-``),
    lists expanded (:func:`flatten`), each with where it came from (``file``, ``file: document 2``).
    Documents that are not mappings (empty ones, a bare scalar) are skipped, as kubectl skips empty
    documents. Raises :class:`OSError` (unreadable) and :class:`BadInputError`: not YAML (one line
    naming the file, line and column), a key given twice in one mapping (:class:`_Loader`), a list item
    that is not an object."""
    out: list[tuple[str, dict[str, Any]]] = []
    for where, text in texts(path):
        try:
            docs = list(yaml.load_all(text, Loader=_Loader))  # _Loader is a SafeLoader
        except yaml.YAMLError as exc:
            raise _not_yaml(where, text, exc) from exc
        for i, doc in enumerate(docs):
            at = f"{where}: document {i + 1}" if len(docs) > 1 else where
            # kubectl cannot turn a NaN or an infinity anywhere in a document into JSON: it refuses the
            # file, whatever the kind or field (fresh-user trial 52 #6: one in metadata.annotations or in
            # a ConfigMap beside the manifests was let through)
            non_finite = non_finite_errors(doc, "")
            if non_finite:
                raise BadInputError(f"{at}: {non_finite[0]}")
            if isinstance(doc, dict):
                out += flatten(doc, at)
    return out
