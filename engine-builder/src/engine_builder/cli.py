"""``engine-builder`` command line: ``run --spec build.yaml --workdir DIR [--from-stage STAGE]``,
``stages``.

Filled in by the engine-builder issue; see ``engine_builder.pipeline``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from engine_builder.pipeline import main as pipeline_main


def main(argv: Sequence[str] | None = None) -> int:
    return pipeline_main(argv)


if __name__ == "__main__":
    sys.exit(main())
