"""The S3 artifact init container's script, run for real against moto's S3 server on loopback."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from moto.server import ThreadedMotoServer

from trtllm_operator.render.deployment import FETCH_SCRIPT


@pytest.fixture
def s3_endpoint() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


def fetch(endpoint: str, bucket: str, prefix: str, dest: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    return subprocess.run(
        [sys.executable, "-c", FETCH_SCRIPT, bucket, prefix, str(dest)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_downloads_complete_artifact_and_refuses_incomplete(s3_endpoint: str, tmp_path: Path) -> None:
    s3 = boto3.client(
        "s3",
        endpoint_url=s3_endpoint,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )
    s3.create_bucket(Bucket="engines")
    files = {"engine/rank0.engine": b"\x00" * 2048, "tokenizer/tokenizer.json": b"{}", "manifest.json": b"{}"}
    for rel, data in files.items():
        s3.put_object(Bucket="engines", Key=f"llm/key1/{rel}", Body=data)
    s3.put_object(Bucket="engines", Key="llm/key10/other", Body=b"not ours")
    s3.put_object(Bucket="engines", Key="llm/key2/engine/rank0.engine", Body=b"x")

    result = fetch(s3_endpoint, "engines", "llm/key1", tmp_path / "a")
    assert result.returncode == 0, result.stderr
    got = {
        str(p.relative_to(tmp_path / "a")): p.read_bytes() for p in (tmp_path / "a").rglob("*") if p.is_file()
    }
    assert got == files  # nothing from the key10 prefix, no .part leftovers

    result = fetch(s3_endpoint, "engines", "llm/key2", tmp_path / "b")
    assert result.returncode != 0 and "manifest.json not found" in result.stderr
