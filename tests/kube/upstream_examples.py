"""Upstream Kueue's own example manifests (site/static/examples), read at test time, never copied.

They come from a checkout or mirror of kubernetes-sigs/kueue: ``$PYKUEUE_UPSTREAM_KUEUE``
(a git directory or work tree), else the mirror this project's machines keep at
/work/.mirror/kubernetes-sigs+kueue/repo. The tests submit them as written, apart from
the LocalQueue name where they ask for it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

DEFAULT_MIRROR = Path("/work/.mirror/kubernetes-sigs+kueue/repo")


def source() -> Path:
    return Path(os.environ.get("PYKUEUE_UPSTREAM_KUEUE", DEFAULT_MIRROR))


def example(path: str) -> str:
    """The text of ``site/static/examples/<path>`` at the source's HEAD."""
    repo = source()
    name = f"site/static/examples/{path}"
    if (repo / name).is_file():
        return (repo / name).read_text()
    proc = subprocess.run(
        ["git", "-C", str(repo), "show", f"HEAD:{name}"], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        pytest.fail(
            f"upstream Kueue's example {name} is not readable from {repo} ({proc.stderr.strip()}); "
            "set PYKUEUE_UPSTREAM_KUEUE to a kubernetes-sigs/kueue checkout",
            pytrace=False,
        )
    return proc.stdout
