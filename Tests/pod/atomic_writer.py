"""ConfigMap and Secret volumes laid out as the kubelet's AtomicWriter (pkg/volume/util/atomic_writer.go) lays
them out, and updated as it updates them."""
from __future__ import annotations

import os
import pathlib
import random
import shutil
import time


def _timestamped_name() -> str:
    now = time.time()
    stamp = time.strftime("..%Y_%m_%d_%H_%M_%S", time.gmtime(now))
    return f"{stamp}.{random.randrange(10**8, 10**9)}"


class ProjectedFiles:
    """One ConfigMap or Secret volume's directory on the host, written as the kubelet's AtomicWriter writes it."""

    def __init__(self, directory: pathlib.Path):
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        os.chmod(directory, 0o755)

    def write(self, files: dict[str, tuple[bytes, int]]) -> None:
        """files: relative path → (content, mode as the container's user sees it)."""
        data_link = self.directory / "..data"
        old = os.readlink(data_link) if data_link.is_symlink() else None
        name = _timestamped_name()
        target = self.directory / name
        target.mkdir()
        for relative, (content, mode) in files.items():
            path = target / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
            os.chmod(path, mode)
        os.chmod(target, 0o755)
        temporary = self.directory / "..data_tmp"
        if temporary.is_symlink():
            temporary.unlink()
        os.symlink(name, temporary)
        os.rename(temporary, data_link)  # the atomic step: readers see the old set or the new one
        wanted = {relative.split("/")[0] for relative in files}
        for entry in self.directory.iterdir():
            if entry.name.startswith(".."):
                continue
            if entry.name not in wanted and entry.is_symlink():
                entry.unlink()
        for top in wanted:
            link = self.directory / top
            if not link.is_symlink():
                os.symlink(f"..data/{top}", link)
        if old:
            shutil.rmtree(self.directory / old, ignore_errors=True)
