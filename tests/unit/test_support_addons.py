"""hack/localcluster's reading of a CustomResourceDefinition's status (no cluster), which the control
plane's CRD install and tests/support/addons.py wait on."""

from __future__ import annotations

from typing import Any

import pytest
from localcluster import crd_established

ESTABLISHED = {"type": "Established", "status": "True"}


@pytest.mark.parametrize(
    ("crd", "established"),
    [
        # just created: the API server sends conditions: null until the apiextensions controllers
        # write the status (what made `kubectl wait --for=condition=Established` exit 1)
        ({"status": {"conditions": None, "storedVersions": ["v1"]}}, False),
        ({"status": {}}, False),
        ({}, False),
        ({"status": {"conditions": [{"type": "NamesAccepted", "status": "True"}]}}, False),
        ({"status": {"conditions": [{"type": "Established", "status": "False"}]}}, False),
        ({"status": {"conditions": [{"type": "NamesAccepted", "status": "True"}, ESTABLISHED]}}, True),
    ],
)
def test_a_crd_is_established_only_with_its_condition_true(crd: dict[str, Any], established: bool) -> None:
    assert crd_established(crd) is established
