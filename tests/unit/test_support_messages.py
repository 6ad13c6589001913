"""tests/support/messages.py: the fuzz test's "the message names the mutated field" check, which must
fail for a message that names only ``spec`` or another field (issue 23 item 4)."""

from __future__ import annotations

import pytest
from support.messages import names_a_mutated_field

MUTATED = [("set", "spec.build.maxBatchSize")]


@pytest.mark.parametrize(
    "message",
    [
        # a schema error: the whole path (kube-apiserver's "<path>: Invalid value: ..." field errors)
        'LLMEngine.llm.trtllm-operator.dev "e-1" is invalid: spec.build.maxBatchSize: Invalid value: 0:'
        " spec.build.maxBatchSize in body should be greater than or equal to 1",
        # a CEL rule on the enclosing object: its path and the field's name
        'LLMEngine.llm.trtllm-operator.dev "e-1" is invalid: spec.build: Invalid value: "object":'
        " maxBatchSize must not exceed maxNumTokens",
        # the operator's InvalidSpec message
        "spec.build.maxBatchSize: 100000 is larger than the GPU can hold; lower it",
    ],
)
def test_a_message_naming_the_mutated_field_passes(message: str) -> None:
    assert names_a_mutated_field(message, MUTATED)


@pytest.mark.parametrize(
    "message",
    [
        'LLMEngine.llm.trtllm-operator.dev "e-1" is invalid: spec: Invalid value: "object": spec is invalid',
        'LLMEngine.llm.trtllm-operator.dev "e-1" is invalid: spec.gpu.product: Unsupported value: "x"',
        'spec.build: Invalid value: "object": maxNumTokens must be at least maxSeqLen',
    ],
)
def test_a_message_naming_only_spec_or_another_field_fails(message: str) -> None:
    assert not names_a_mutated_field(message, MUTATED)


def test_any_one_of_several_mutations_will_do() -> None:
    both = [*MUTATED, ("drop", "spec.gpu.product")]
    assert names_a_mutated_field("is invalid: spec.gpu.product: Required value", both)
