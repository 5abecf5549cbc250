"""A demo's throwaway folders: `up --demo` without ``--data`` makes them, and they go with it.

    pykueue-demo-XXXX/        the data folder (store, logs, socket, client.json)
    pykueue-demo-XXXX-work/   the jobs' folders

Both are removed when the demo stops (Ctrl-C, SIGTERM, an error). A demo killed with -9
cannot clean up: the next demo removes such folders in the same temp folder, once
nothing holds their lock and no process of theirs still runs. A demo never writes the
user's client config: the CLI keeps talking to the user's own server.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from pathlib import Path

from pykueue.standalone.node.pod_processes import pods_of

PREFIX = "pykueue-demo-"
WORK_SUFFIX = "-work"


def work_folder(data_dir: Path) -> Path:
    return data_dir.parent / f"{data_dir.name}{WORK_SUFFIX}"


def remove(data_dir: Path, work_dir: Path | None = None) -> None:
    for folder in (data_dir, work_dir or work_folder(data_dir)):
        shutil.rmtree(folder, ignore_errors=True)


def sweep_stale(data_dir: Path) -> list[Path]:
    """Remove the folders of earlier demos beside ``data_dir`` that nothing uses; those removed."""
    removed = []
    for folder in sorted(data_dir.parent.glob(f"{PREFIX}*")):
        if folder == data_dir or folder.name.endswith(WORK_SUFFIX) or not _stale(folder):
            continue
        remove(folder)
        removed.append(folder)
    return removed


def _stale(folder: Path) -> bool:
    """Ours, its server gone (its lock free), and no process of it left.

    A folder without a lock file is passed over: it may be a demo starting this moment,
    made by its `up` and not yet locked by its server.
    """
    try:
        if folder.is_symlink() or not folder.is_dir() or folder.stat().st_uid != os.getuid():
            return False
        with open(folder / "pykueue.lock") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    with contextlib.suppress(OSError):
        return not pods_of(folder / "pykueue.db")
    return False
