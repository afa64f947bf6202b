"""Writing files atomically: every file the package writes goes to a temporary file in the same
folder, then one rename, so a crash never leaves a half-written file under the real name.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def atomic_write(
    path: str | os.PathLike[str], write: Callable[[Path], None], suffix: str = ".tmp"
) -> Path:
    """Call ``write(tmp)`` on a temporary path beside ``path``, then rename it to ``path``.

    ``write`` must create the file at ``tmp`` (or fill the empty file there); if it raises, nothing
    is renamed, so a check inside ``write`` (a checksum) that raises leaves ``path`` untouched. The
    folder is created if needed. The file gets the permissions of any new file (``0o666`` less the
    umask), not the private ``0o600`` of a temporary file. Returns ``path``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=path.name + ".", suffix=suffix, dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        umask = os.umask(0o022)  # reading the umask means setting it, so it is set back at once
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
