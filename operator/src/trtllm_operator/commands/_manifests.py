"""Reading manifests as ``kubectl apply -f`` reads them: one home for the commands that take them
(``render -f`` / ``--engine``, ``simulate --deployment``).

A path is a file, a directory (its ``.yaml``/``.yml``/``.json`` files, not recursively, as
``kubectl apply -f DIR``) or ``-`` (standard input, as ``kubectl apply -f -``); each file may hold
several YAML documents; a list (``kind: List``, what ``kubectl get -o yaml`` prints) is expanded into
its items as ``kubectl apply`` expands it (:func:`flatten`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

#: ``-f -`` / ``--engine -`` / ``--deployment -``: read standard input, as ``kubectl apply -f -`` does.
STDIN = "-"


#: Files of a directory given to ``-f``/``--engine`` that are read, as ``kubectl apply -f DIR`` reads
#: them (kubernetes/cli-runtime ``pkg/resource/builder.go`` ``FileExtensions``; not recursive, as
#: kubectl without ``-R``).
FILE_EXTENSIONS = (".json", ".yaml", ".yml")


class BadInputError(ValueError):
    """Input that cannot be read as kubectl would read it; the message names where and why."""


def _not_yaml(where: str, text: str, exc: yaml.YAMLError) -> BadInputError:
    """One line naming the file (or ``standard input``), the line and column, and what is wrong;
    PyYAML's own message spans five lines and names ``"<unicode string>"``, not the file (fresh-user
    trial 44 F8: with ``-f DIR`` it did not say which file)."""
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


def texts(path: str) -> list[tuple[str, str]]:
    """(where, text) of each file ``path`` names: standard input, a directory's files, or the file.
    Raises :class:`OSError` when a file cannot be read."""
    if path == STDIN:
        return [("standard input", sys.stdin.read())]
    if Path(path).is_dir():
        files = sorted(p for p in Path(path).iterdir() if p.is_file() and p.suffix in FILE_EXTENSIONS)
        return [(str(p), p.read_text()) for p in files]
    return [(path, Path(path).read_text())]


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
    naming the file, line and column), a list item that is not an object."""
    out: list[tuple[str, dict[str, Any]]] = []
    for where, text in texts(path):
        try:
            docs = list(yaml.safe_load_all(text))
        except yaml.YAMLError as exc:
            raise _not_yaml(where, text, exc) from exc
        for i, doc in enumerate(docs):
            if isinstance(doc, dict):
                out += flatten(doc, f"{where}: document {i + 1}" if len(docs) > 1 else where)
    return out
