"""The Multi30k loader: verified files, atomic downloads, fast and helpful failure offline.

No test here touches the internet: downloads are served by a local HTTP server on 127.0.0.1
from a temporary copy of the data (the ``multi30k_dir`` fixture of the repository's
``conftest.py``).
"""

from __future__ import annotations

import gzip
import shutil
import threading
import urllib.request
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from transformer_tasks import multi30k
from transformer_tasks.multi30k import ChecksumError, DownloadError, load_multi30k, load_split


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (signature of the base class)
        pass


class _TruncatingHandler(_QuietHandler):
    """Announces the full length of a file, sends 100 bytes of it, and hangs up."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        body = (Path(self.directory) / Path(self.path).name).read_bytes()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body[:100])
        self.wfile.flush()
        self.close_connection = True


@pytest.fixture
def serve() -> Iterator:
    servers: list[ThreadingHTTPServer] = []

    def start(folder: Path, handler: type = _QuietHandler) -> str:
        server = ThreadingHTTPServer(("127.0.0.1", 0), partial(handler, directory=str(folder)))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_the_data_set_loads_with_the_documented_sizes(multi30k_dir: Path) -> None:
    data = load_multi30k(multi30k_dir)
    assert {split: len(pairs) for split, pairs in data.items()} == multi30k.SIZES
    assert data["val"][0] == (
        "Eine Gruppe von Männern lädt Baumwolle auf einen Lastwagen",
        data["val"][0][1],
    )
    assert data["val"][0][1].startswith("A group of men are loading cotton")
    assert all("\n" not in de and "\n" not in en and de and en for de, en in data["train"])


def test_data_dir_comes_from_the_environment_when_not_given(
    multi30k_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MULTI30K_DIR", str(multi30k_dir))
    assert multi30k.default_data_dir() == multi30k_dir
    assert len(load_split("test_2016_flickr")) == 1000


def test_corrupted_file_is_refused_naming_file_and_hashes(
    multi30k_dir: Path, tmp_path: Path
) -> None:
    for name in ("val.de.gz", "val.en.gz"):
        shutil.copy(multi30k_dir / name, tmp_path / name)
    corrupted = bytearray((tmp_path / "val.en.gz").read_bytes())
    corrupted[-20] ^= 0xFF
    (tmp_path / "val.en.gz").write_bytes(bytes(corrupted))
    with pytest.raises(ChecksumError) as info:
        load_split("val", tmp_path)
    message = str(info.value)
    assert "val.en.gz" in message
    assert multi30k.SHA256["val.en.gz"] in message
    assert multi30k.sha256_of(tmp_path / "val.en.gz") in message
    assert (tmp_path / "val.en.gz").read_bytes() == bytes(corrupted), (
        "a refused file must be left for inspection"
    )


def test_offline_without_cache_fails_at_once_saying_how_to_provide_the_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    opened: list[str] = []
    urlopen = urllib.request.urlopen

    def counted(url: str, *args: Any, **kwargs: Any) -> Any:
        opened.append(url)
        return urlopen(url, *args, **kwargs)

    monkeypatch.setattr(urllib.request, "urlopen", counted)
    with pytest.raises(DownloadError) as info:
        # nothing listens on port 1: refused at once
        load_multi30k(cache, base_url="http://127.0.0.1:1/")
    # At once: one connection, refused, and no retry nor wait for the other files (a count, not a
    # clock, so that a busy machine cannot fail it).
    assert len(opened) == 1
    message = str(info.value)
    assert "MULTI30K_DIR" in message and "--data-dir" in message and "train.de.gz" in message
    assert str(cache) in message
    assert not any(cache.iterdir()), "a failed download must leave nothing behind"


def test_download_verifies_and_writes_every_file(multi30k_dir: Path, tmp_path: Path, serve) -> None:
    served = tmp_path / "served"
    shutil.copytree(multi30k_dir, served)
    cache = tmp_path / "cache"
    data = load_multi30k(cache, ["val", "test_2016_flickr"], base_url=serve(served))
    assert sorted(p.name for p in cache.iterdir()) == sorted(
        ["val.de.gz", "val.en.gz", "test_2016_flickr.de.gz", "test_2016_flickr.en.gz"]
    )
    for path in cache.iterdir():
        assert path.read_bytes() == (multi30k_dir / path.name).read_bytes()
    assert data["val"] == load_split("val", multi30k_dir)
    # A second call uses the cache: it works with the server gone.
    assert load_multi30k(cache, ["val"], base_url="http://127.0.0.1:1/")["val"] == data["val"]


def test_download_with_wrong_content_is_refused_and_leaves_nothing(tmp_path: Path, serve) -> None:
    served = tmp_path / "served"
    served.mkdir()
    for name in ("val.de.gz", "val.en.gz"):
        with gzip.open(served / name, "wt", encoding="utf-8") as handle:
            handle.write("nicht die echten Daten\n")
    cache = tmp_path / "cache"
    with pytest.raises(ChecksumError) as info:
        load_split("val", cache, base_url=serve(served))
    assert "val.de.gz" in str(info.value) and multi30k.SHA256["val.de.gz"] in str(info.value)
    assert list(cache.iterdir()) == []


def test_interrupted_download_leaves_no_partial_file(
    multi30k_dir: Path, tmp_path: Path, serve
) -> None:
    served = tmp_path / "served"
    shutil.copytree(multi30k_dir, served)
    cache = tmp_path / "cache"
    with pytest.raises(DownloadError) as info:
        load_split("val", cache, base_url=serve(served, _TruncatingHandler))
    assert "val.de.gz" in str(info.value)
    assert list(cache.iterdir()) == []


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="split='dev'"):
        multi30k.file_name("dev", "de")
    with pytest.raises(ValueError, match="language='fr'"):
        multi30k.file_name("val", "fr")
