"""The kopf settings the operator's startup handler configures, for unit tests that inspect them.

``configured_settings()`` runs ``trtllm_operator.handlers.startup.configure_kopf`` on a fresh
``kopf.OperatorSettings`` and undoes its one process-wide side effect: ``configure_kopf`` points
``plumbing.WORKQUEUE.executor`` at the settings' thread pool, which this puts back (shutting the new
pool down) so later tests see the executor they had. Used by tests/unit/test_kopf_diffbase.py and
tests/unit/test_kopf_watchstream.py (duplicates D1 of stop 39)."""

from __future__ import annotations

import kopf

from trtllm_operator.handlers import plumbing, startup


def configured_settings() -> kopf.OperatorSettings:
    """A fresh ``kopf.OperatorSettings`` as ``startup.configure_kopf`` leaves it; the workqueue's
    executor is restored to what it was before the call."""
    settings = kopf.OperatorSettings()
    saved = plumbing.WORKQUEUE.executor
    try:
        startup.configure_kopf(settings=settings)
    finally:
        pool = plumbing.WORKQUEUE.executor
        plumbing.WORKQUEUE.executor = saved
        if pool is not None and pool is not saved:
            pool.shutdown()
    return settings
