"""Sphinx configuration of the collection's reference: ``make docs`` builds it into ``build/docs``."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import bnn

project = "bnn-collection"
release = version = bnn.__version__
author = "the bnn-collection maintainers"
copyright = "the bnn-collection maintainers"

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
]

# api.rst lists the packages; autosummary writes one page per module under api/ when the build starts
# (the folder is generated, not committed)
autosummary_generate = True
templates_path = ["_templates"]
exclude_patterns = ["_build"]
# importing bnn.__main__ would run the command line: a mock stands in for it while the pages are generated
autosummary_mock_imports = ["bnn.__main__"]

# the members each module defines (not those it imports: a package's re-exports are documented where they are
# defined, so a short name finds one target), in source order
autodoc_default_options = {"members": True, "show-inheritance": True, "ignore-module-all": True}
autodoc_member_order = "bysource"
autodoc_typehints = "description"

# numpydoc docstrings
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False

html_theme = "alabaster"
html_title = f"bnn-collection {release}"


def document_shadowed_modules(app) -> None:
    """Make the page of a module that its package's namespace hides document the module.

    ``bnn.inference`` imports the function ``fit`` from its module ``fit``, and ``bnn.inference.evaluation`` the function
    ``compare`` from its module ``compare``: autosummary resolves ``bnn.inference.fit`` to the function and writes a
    page for it alone, leaving out the module's docstring and its other members. Runs after autosummary has written the
    pages (it too listens to ``builder-inited``, at the default priority 500).
    """
    for page in sorted(Path(app.srcdir, "api").glob("*.rst")):
        name = page.stem
        if ".. automodule::" in page.read_text(encoding="utf-8") or importlib.util.find_spec(name) is None:
            continue
        page.write_text(f"{name}\n{'=' * len(name)}\n\n.. automodule:: {name}\n", encoding="utf-8")


def setup(app):
    app.connect("builder-inited", document_shadowed_modules, priority=600)
