"""Saved posterior folders damaged as a test needs: :func:`reseal` lists the files of a folder with their new
SHA-256 in its ``fit.json``, as if a fit had written them, so that the checks behind the digests are reached."""

from __future__ import annotations

import json
from pathlib import Path

from bnn.inference.core.posterior_files import FIT_FILE, sha256


def reseal(folder: Path) -> None:
    """Rewrite the ``files`` entry of ``folder``'s ``fit.json`` with the SHA-256 of the listed files still there (a
    ``fit.json`` that is not a JSON object with that entry is left as it is)."""
    try:
        meta = json.loads((folder / FIT_FILE).read_text())
    except ValueError:
        return
    if not isinstance(meta, dict) or not isinstance(meta.get("files"), dict):
        return
    meta["files"] = {name: sha256(folder / name) for name in meta["files"] if (folder / name).is_file()}
    (folder / FIT_FILE).write_text(json.dumps(meta))
