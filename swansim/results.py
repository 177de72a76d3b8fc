"""Run manifests and how result files are written.

Results files hold only simulated figures (the same seed gives the same bytes); everything
that differs between reruns - when, on which machine, how long - goes to the manifest.

Every result file is written whole or not at all (`atomic`): to a temporary name in its
directory, renamed over the final name once complete. An interruption or a full disk leaves
the previous file (or none), never a truncated one, and an I/O failure is one line naming the
file (`InputError`), not a traceback.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform as _py_platform
import subprocess
import time
from dataclasses import asdict, is_dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Iterator

from swansim import __version__
from swansim.errors import InputError

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


@contextlib.contextmanager
def atomic(path: Path | str) -> Iterator[Path]:
    """Write ``path`` whole or not at all: yields a temporary path beside it to write to, which
    replaces ``path`` when the block completes; on any failure it is removed. An OSError (a full
    disk, a directory in the way) becomes one InputError naming the file."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        yield tmp
        os.replace(tmp, path)
    except OSError as e:
        raise InputError(str(path), "write", f"cannot write ({e.strerror or e}); files written before it are kept") \
            from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


class DirLock:
    """Held while a run writes ``directory``: ``.lock`` there names the writing process. A
    second run into the directory is refused while that process lives (a stale lock, left by a
    killed run, is taken over); the same process may hold it again (nested calls)."""

    def __init__(self, directory: Path | str):
        self.path = Path(directory) / ".lock"
        self._mine = False

    def __enter__(self) -> "DirLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                try:
                    pid = int(self.path.read_text().strip() or 0)
                except (OSError, ValueError):
                    pid = 0
                if pid == os.getpid():
                    return self                # nested: the outer holder releases it
                if pid and _alive(pid):
                    raise InputError(str(self.path.parent), "lock", f"another run (process {pid}) is writing this "
                                                                    "directory; wait for it or use another one") from None
                with contextlib.suppress(FileNotFoundError):
                    self.path.unlink()         # stale: its process is gone
                continue
            with os.fdopen(fd, "w") as f:
                f.write(str(os.getpid()))
            self._mine = True
            return self

    def __exit__(self, *exc) -> None:
        if self._mine:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def write_text(path: Path | str, text: str) -> Path:
    with atomic(path) as tmp:
        tmp.write_text(text)
    return Path(path)


def write_bytes(path: Path | str, data: bytes) -> Path:
    with atomic(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def write_csv(df, path: Path | str, **kwargs) -> Path:
    """A frame as CSV (``index=False`` unless given), atomically."""
    kwargs.setdefault("index", False)
    with atomic(path) as tmp:
        df.to_csv(tmp, **kwargs)
    return Path(path)


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
    sha256), version, commit, profile checksums (and the sha256 of a runtime the config names by
    a .toml file), and (only here) the wall-clock facts of the run."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cfg = asdict(config) if is_dataclass(config) else config
    runtime = cfg.get("runtime") if isinstance(cfg, dict) else None
    if isinstance(runtime, str) and runtime.endswith(".toml") and Path(runtime).is_file():
        extra = {"runtime_sha256": sha256_of(Path(runtime)), **extra}   # a runtime file is not among the profiles
    doc = {"swansim_version": __version__, "git_commit": git_commit(), "config": cfg, "seed": seed,
           "files": file_entries(out_dir, files), "profiles_sha256": profile_checksums(), **extra,
           "python": _py_platform.python_version(), "written_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    return write_text(out_dir / name, json.dumps(doc, indent=2, default=str))


def add_to_manifest(out_dir: Path, files: Iterable[str], name: str = "manifest.json", **extra) -> Path:
    """List more files (written after the manifest, e.g. a cache saved last) in ``out_dir``'s
    manifest, hashing only those; ``extra`` fields replace the manifest's."""
    path = Path(out_dir) / name
    doc = json.loads(path.read_text())
    doc["files"] = dict(sorted({**doc["files"], **file_entries(out_dir, files)}.items()))
    doc.update(extra)
    return write_text(path, json.dumps(doc, indent=2, default=str))
