"""``python3 -m engine_builder …`` = ``engine-builder …``: how a builder Job runs the bundle the
operator delivers into a stock TensorRT-LLM image, with that image's own interpreter
(:func:`engine_builder.contract.bundle_commands`; docs/engine-builder.md, "Running on a stock image")."""

from __future__ import annotations

import sys

from engine_builder.cli import main

if __name__ == "__main__":
    sys.exit(main())
