"""The releases the upgrade test starts from (tests/support/releases.py) are landed mains, and this
tree differs from each exactly in the areas it declares — so the upgrade test's ``EXPECTED`` for
it (tests/e2e/test_upgrade.py) rests on facts, and a change that lands after a release, or a bump
that is not made, fails here, in the unit tier, with what to do (docs/install.md, "Upgrade tests")."""

from __future__ import annotations

import pytest
from support.releases import AREAS, BASES, PREVIOUS_RELEASE, Base, differing_areas, git


def test_the_previous_release_is_the_upgrade_tests_first_base() -> None:
    assert BASES[0] is PREVIOUS_RELEASE
    assert len({b.name for b in BASES}) == len(BASES)


@pytest.mark.parametrize("base", BASES, ids=[b.name for b in BASES])
def test_each_base_is_a_landed_main_in_this_history(base: Base) -> None:
    """A full commit id, in this clone (a shallow clone lacks it: the upgrade test's release_tree
    says so too), and on HEAD's first-parent history: what main was once (a landing), not a commit
    of a side branch that a merge brought in."""
    assert len(base.commit) == 40, base.commit
    found = git("cat-file", "-e", f"{base.commit}^{{commit}}")
    assert found.returncode == 0, f"{base.commit} is not in this clone: git fetch --unshallow"
    first_parents = git("rev-list", "--first-parent", "HEAD").stdout.split()
    assert base.commit in first_parents, f"{base.name} {base.commit}: not a landed main"


@pytest.mark.parametrize("base", BASES, ids=[b.name for b in BASES])
def test_this_tree_differs_from_each_base_only_where_it_says(base: Base) -> None:
    assert base.differs <= set(AREAS), base.differs
    differs = differing_areas(base.commit)
    assert differs == base.differs, (
        f"this tree differs from {base.name} ({base.commit[:7]}) in {sorted(differs)}, it says "
        f"{sorted(base.differs)}. At a release, bump PREVIOUS_RELEASE to it; otherwise name the area in "
        "its differs and say in tests/e2e/test_upgrade.py's EXPECTED what the change requires "
        '(docs/install.md, "Upgrade tests")'
    )
