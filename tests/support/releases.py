"""The releases an upgrade starts from (tests/e2e/test_upgrade.py), and what differs between each of
them and this tree — the facts its ``EXPECTED`` lists rest on; tests/unit/test_releases.py checks
them on every run of the unit tier.

The project has no release tags: a release is a commit of main's first-parent history (a landed
main). How to bump :data:`PREVIOUS_RELEASE` at a release: docs/install.md, "Upgrade tests".
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

#: What decides an upgrade's outcome, by area: the operator's and the builder's code and pins (their
#: source is what ``status.reconciledBy`` digests, trtllm_operator/handlers/release.py; their pins
#: and images), the chart, and the CRDs.
AREAS: dict[str, tuple[str, ...]] = {
    "code": ("operator", "engine-builder"),
    "chart": ("charts",),
    "crds": ("crds",),
}


@dataclass(frozen=True)
class Base:
    """A release an upgrade starts from, and the areas (:data:`AREAS`) in which this tree differs
    from it — declared, so that a change in an area makes tests/unit/test_releases.py fail until the
    upgrade test's ``EXPECTED`` for this base says what that change requires."""

    name: str  # the test id
    commit: str  # the full id, so that no later commit can shadow it
    differs: frozenset[str]


#: The last release: stop 43's landing on main (39deda5, 2026-12-05). Since then the operator's code
#: changed (issue 19's token weighting, issue 20's bounded connection pool, fresh-user trials 49-50's
#: fixes) and the LLMDeployment CRD, in the chart's crds/ too, gained three optional fields without
#: defaults (spec.autoscaling.capacity.promptTokens / outputTokens / outputTokenWeight) and a CEL rule
#: on them, and the LLMEngine CRD's format × backend refusals changed wording: objects that do not set
#: the new fields read back unchanged, and the upgrade rebuilds and restarts
#: nothing and writes one status per object, the new ``status.reconciledBy`` stamp
#: (tests/e2e/test_upgrade.py ``FROM_THE_PREVIOUS_RELEASE``). Bumped at each release (docs/install.md,
#: "Upgrade tests").
PREVIOUS_RELEASE = Base(
    name="from-previous-release",
    commit="39deda5b264c9ec7adb12efe5807bd7605e64fc3",
    differs=frozenset({"code", "chart", "crds"}),
)

#: Stop 29's main (3898a0c, 2026-12-01), the release before the engine-key/v2 migration (issue 26),
#: the per-deployment NetworkPolicies and the artifact verifier (issue 24): kept as the upgrade that
#: rebuilds every engine once and rolls every deployment. Never bumped.
KEY_MIGRATION = Base(
    name="across-the-key-migration",
    commit="3898a0c46fe698e6dbcf90e262af8ba5b29d827a",
    differs=frozenset(AREAS),
)

BASES = (PREVIOUS_RELEASE, KEY_MIGRATION)


def git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True, check=False, timeout=60
    )


def differing_areas(commit: str) -> frozenset[str]:
    """The areas whose files differ between ``commit`` and this working tree (tracked files: ``git
    diff --quiet commit -- paths``)."""
    out = set()
    for area, paths in AREAS.items():
        diff = git("diff", "--quiet", commit, "--", *paths)
        assert diff.returncode in (0, 1), f"git diff {commit} failed: {diff.stderr}"
        if diff.returncode == 1:
            out.add(area)
    return frozenset(out)
