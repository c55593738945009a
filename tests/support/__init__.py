"""Helpers shared by the test modules: problems, examples, process plumbing and the scripts that subprocess tests run
(``python -m tests.support.NAME``). Fixtures stay in the conftest.py files; a helper used by one test module stays
in that module."""
