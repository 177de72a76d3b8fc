"""Run manifests: what a run was, so that its results can be traced and reproduced.

Results files hold only simulated figures (the same seed gives the same bytes); everything
that differs between reruns - when, on which machine, how long - goes to the manifest.
"""
from __future__ import annotations

import hashlib
import json
import platform as _py_platform
import subprocess
import time
from dataclasses import asdict, is_dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterable

from swansim import __version__

_REPO = Path(__file__).resolve().parents[1]


@lru_cache(maxsize=1)
def git_commit() -> str | None:
    """The commit of the source tree this code runs from ("+dirty" if it has local changes),
    None outside a git checkout."""
    try:
        rev = subprocess.run(["git", "-C", str(_REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5).stdout.strip()
        if not rev:
            return None
        dirty = subprocess.run(["git", "-C", str(_REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return rev + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def sha256_of(path: Path) -> str:
    """The full sha256 of a file's bytes, read in blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def profile_checksums(root: Path | None = None) -> dict[str, str]:
    """sha256 of every device profile and runtime profile, by relative path."""
    from swansim.dnn.runtime import RUNTIME_DIR
    from swansim.hw.profile import PROFILE_DIR

    out = {}
    for base in (Path(root or PROFILE_DIR), RUNTIME_DIR):
        for p in sorted(base.rglob("*.toml")):
            out[f"{base.name}/{p.relative_to(base)}"] = sha256_of(p)
    return out


def file_entries(out_dir: Path, files: Iterable[str]) -> dict[str, dict]:
    """Per file written (relative to ``out_dir``): its size and full sha256, in name order."""
    out_dir = Path(out_dir)
    return {f: {"bytes": (out_dir / f).stat().st_size, "sha256": sha256_of(out_dir / f)}
            for f in sorted(set(files))}


def write_manifest(out_dir: Path, config, seed: int, files: Iterable[str] = (), name: str = "manifest.json",
                   **extra) -> Path:
    """``name`` in ``out_dir``: config, seed, every file written (relative path -> size and
    sha256), version, commit, profile checksums, and (only here) the wall-clock facts of the run."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cfg = asdict(config) if is_dataclass(config) else config
    doc = {"swansim_version": __version__, "git_commit": git_commit(), "config": cfg, "seed": seed,
           "files": file_entries(out_dir, files), "profiles_sha256": profile_checksums(), **extra,
           "python": _py_platform.python_version(), "written_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    path = out_dir / name
    path.write_text(json.dumps(doc, indent=2, default=str))
    return path


def add_to_manifest(out_dir: Path, files: Iterable[str], name: str = "manifest.json") -> Path:
    """List more files (written after the manifest, e.g. a cache saved last) in ``out_dir``'s manifest."""
    path = Path(out_dir) / name
    doc = json.loads(path.read_text())
    doc["files"] = dict(sorted({**doc["files"], **file_entries(out_dir, files)}.items()))
    path.write_text(json.dumps(doc, indent=2, default=str))
    return path
