"""Multi30k (task 1; Elliott et al., 2016): German-English image captions, the book's translation
data set.

29,000 training pairs, 1,014 validation pairs and 1,000 test pairs (``test_2016_flickr``), read as
``(german, english)`` pairs from the six files of github.com/multi30k/dataset. Their folder is the
``data_dir`` argument (the command line's ``--data-dir``), else ``$MULTI30K_DIR``, else
``~/.cache/transformer_lib/multi30k``. A missing file is downloaded there (from the mirror
``$MULTI30K_URL`` if set) to a temporary name, verified, then renamed into place; a file whose
SHA-256 is wrong is refused, never silently used or replaced.
"""

from __future__ import annotations

import gzip
import hashlib
import http.client
import os
import shutil
import urllib.error
import urllib.request
from collections.abc import Iterable
from pathlib import Path

from transformer_lib.files import atomic_write

BASE_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/"
URL_ENV_VAR = "MULTI30K_URL"  # a mirror to download from instead of BASE_URL
SPLITS = ("train", "val", "test_2016_flickr")
LANGUAGES = ("de", "en")
ENV_VAR = "MULTI30K_DIR"
DOWNLOAD_TIMEOUT = 10.0

# SHA-256 of each file at commit a3d2e0d26b56f3846f66a952536ffed4e401d05a of
# github.com/multi30k/dataset.
SHA256 = {
    "train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
    "test_2016_flickr.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
    "test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
}
SIZES = {"train": 29_000, "val": 1_014, "test_2016_flickr": 1_000}


class Multi30kError(RuntimeError):
    """The data set cannot be used: a file is missing and cannot be downloaded, or is corrupted."""


class ChecksumError(Multi30kError):
    """A file's SHA-256 is not the one the data set is known to have."""


class DownloadError(Multi30kError):
    """A file is not in the data folder and could not be downloaded."""


def default_data_dir() -> Path:
    """The data folder used when none is given: ``$MULTI30K_DIR``, else
    ``~/.cache/transformer_lib/multi30k``.
    """
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "transformer_lib" / "multi30k"


def file_name(split: str, language: str) -> str:
    """The file holding one side of one split, e.g. ``file_name("val", "de") == "val.de.gz"``."""
    if split not in SPLITS:
        raise ValueError(f"split={split!r} is not one of {list(SPLITS)}")
    if language not in LANGUAGES:
        raise ValueError(f"language={language!r} is not one of {list(LANGUAGES)}")
    return f"{split}.{language}.gz"


def sha256_of(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a file's bytes."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _how_to_provide(folder: Path) -> str:
    return (
        f"Put the six files {sorted(SHA256)} (from {BASE_URL}) into a folder and point the "
        f"{ENV_VAR} environment variable or the --data-dir option (data_dir= in Python) at it; "
        f"the folder searched was {str(folder)!r}."
    )


def _verify(path: Path) -> Path:
    """Check a file already in the data folder against its known SHA-256."""
    actual = sha256_of(path)
    if actual != SHA256[path.name]:
        raise ChecksumError(
            f"{str(path)!r} is corrupted or incomplete: its sha256 is {actual}, expected "
            f"{SHA256[path.name]} for {path.name}. Delete it to download it again, or replace it "
            "with the original file."
        )
    return path


def _fetch(url: str, name: str, folder: Path, out: Path, timeout: float) -> None:
    """Stream ``url`` into the file ``out``; a network failure or a short body is a
    :class:`~.DownloadError`.
    """
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response, open(out, "wb") as handle:
            expected_length = response.headers.get("Content-Length")
            shutil.copyfileobj(response, handle)
            received = handle.tell()
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as error:
        raise DownloadError(
            f"{name} is not in the data folder and downloading {url} failed ({error}). "
            f"{_how_to_provide(folder)}"
        ) from None
    if (
        expected_length is not None
        and expected_length.isdigit()
        and received != int(expected_length)
    ):
        raise DownloadError(
            f"downloading {url} was interrupted: {received} of {expected_length} bytes arrived; "
            f"nothing was saved. {_how_to_provide(folder)}"
        )


def _download(name: str, folder: Path, base_url: str | None, timeout: float) -> Path:
    """Download ``base_url + name`` into ``folder``: temporary file, verify, then rename into
    place.
    """
    base_url = base_url or os.environ.get(URL_ENV_VAR) or BASE_URL
    url = base_url.rstrip("/") + "/" + name

    def download_and_verify(tmp: Path) -> None:
        _fetch(url, name, folder, tmp, timeout)
        actual = sha256_of(tmp)
        if actual != SHA256[name]:
            raise ChecksumError(
                f"downloaded {name} from {url} but its sha256 is {actual}, "
                f"expected {SHA256[name]}; nothing was saved. {_how_to_provide(folder)}"
            )

    try:
        return atomic_write(folder / name, download_and_verify, suffix=".part")
    except OSError as error:  # the folder cannot be created or written
        raise DownloadError(
            f"{name} is missing and cannot be downloaded into {str(folder)!r}: {error}. "
            f"{_how_to_provide(folder)}"
        ) from None


def ensure_files(
    data_dir: str | os.PathLike[str] | None = None,
    splits: Iterable[str] = SPLITS,
    *,
    base_url: str | None = None,
    timeout: float = DOWNLOAD_TIMEOUT,
) -> dict[str, Path]:
    """Make sure the files of ``splits`` are in the data folder and verified; return ``{name:
    path}``.

    Missing files are downloaded from ``base_url`` (default: ``$MULTI30K_URL``, else ``BASE_URL``);
    without a network the first failed download raises :class:`~.DownloadError`, saying how to
    provide the files.
    """
    folder = Path(data_dir).expanduser() if data_dir is not None else default_data_dir()
    if folder.exists() and not folder.is_dir():
        raise Multi30kError(f"data_dir={str(folder)!r} is not a folder. {_how_to_provide(folder)}")
    names = [file_name(split, language) for split in splits for language in LANGUAGES]
    return {
        name: _verify(folder / name)
        if (folder / name).is_file()
        else _download(name, folder, base_url, timeout)
        for name in names
    }


def _read_lines(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [line.rstrip("\r\n") for line in handle]


def load_split(
    split: str,
    data_dir: str | os.PathLike[str] | None = None,
    *,
    base_url: str | None = None,
    timeout: float = DOWNLOAD_TIMEOUT,
) -> list[tuple[str, str]]:
    """Return one split as a list of ``(german, english)`` pairs, in the file order."""
    return load_multi30k(data_dir, [split], base_url=base_url, timeout=timeout)[split]


def load_multi30k(
    data_dir: str | os.PathLike[str] | None = None,
    splits: Iterable[str] = SPLITS,
    *,
    base_url: str | None = None,
    timeout: float = DOWNLOAD_TIMEOUT,
) -> dict[str, list[tuple[str, str]]]:
    """Return ``{split: [(german, english), ...]}`` for ``splits`` (default: train, val,
    test_2016_flickr).

    All files are checked (and fetched if needed) before any is read, so a missing test file fails
    before minutes are spent on anything else.
    """
    splits = tuple(splits)
    paths = ensure_files(data_dir, splits, base_url=base_url, timeout=timeout)
    data = {}
    for split in splits:
        german, english = (_read_lines(paths[file_name(split, language)]) for language in LANGUAGES)
        if len(german) != len(english):
            raise Multi30kError(
                f"{split}: {len(german)} German lines but {len(english)} English lines"
            )
        data[split] = list(zip(german, english, strict=True))
    return data
