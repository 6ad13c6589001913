"""The local Hub-like server (tests/support/hub.py) against the real huggingface_hub client."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from huggingface_hub import hf_hub_download
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    RemoteEntryNotFoundError,
    RevisionNotFoundError,
)
from support.hub import HubRepo, local_hub

CONFIG = json.dumps({"model_type": "llama"}).encode()
REPO = "org/gated"


def test_hf_hub_download_reads_a_gated_file_with_the_token_and_is_refused_without(tmp_path: Path) -> None:
    with local_hub({REPO: HubRepo({"config.json": CONFIG}, token="hf_right")}) as hub:

        def get(token: str | bool | None, revision: str | None = None, filename: str = "config.json") -> str:
            # A fresh cache each time: huggingface_hub falls back to a cached copy on some errors.
            cache = tmp_path / f"c{len(hub.requests)}"
            return hf_hub_download(
                REPO, filename, revision=revision, token=token, endpoint=hub.url, cache_dir=cache
            )

        assert Path(get("hf_right")).read_bytes() == CONFIG
        assert Path(get("hf_right", revision=HubRepo({}).commit)).read_bytes() == CONFIG
        with pytest.raises(GatedRepoError):
            get(False)
        with pytest.raises(HfHubHTTPError, match="401"):
            get("hf_wrong")
        with pytest.raises(RevisionNotFoundError):
            get("hf_right", revision="v9")
        with pytest.raises(RemoteEntryNotFoundError):
            get("hf_right", filename="missing.json")
        assert ("HEAD", f"/{REPO}/resolve/main/config.json", True) in hub.requests


def test_model_info_lists_files_with_sizes_and_checks_a_sent_token() -> None:
    from huggingface_hub import HfApi  # noqa: PLC0415
    from huggingface_hub.errors import RepositoryNotFoundError  # noqa: PLC0415

    with local_hub({REPO: HubRepo({"config.json": CONFIG}, token="hf_right")}) as hub:
        api = HfApi(endpoint=hub.url)
        info = api.model_info(REPO, revision="main", token="hf_right", files_metadata=True)
        assert info.sha == HubRepo({}).commit and info.gated == "manual"
        assert [(s.rfilename, s.size) for s in info.siblings or []] == [("config.json", len(CONFIG))]
        assert [s.size for s in api.model_info(REPO, token=False).siblings or []] == [None]  # no blobs
        with pytest.raises(HfHubHTTPError, match="401"):
            api.model_info(REPO, token="hf_wrong")
        with pytest.raises(RepositoryNotFoundError):
            api.model_info("org/absent", token=False)
        with pytest.raises(RevisionNotFoundError):
            api.model_info(REPO, revision="v9", token=False)
