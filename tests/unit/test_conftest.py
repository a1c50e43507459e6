"""The suite's own marking (tests/conftest.py): a test is marked `needs_containerd`, `needs_go`
or `needs_kubelet` by where the fixtures it takes are defined, read from pytest's resolved
fixtures (`item._fixtureinfo`, which pytest does not make public). Checked here in a pytest of
its own (pytester), so that a pytest release that moves them fails here, rather than quietly
leaving every such test unmarked (and run where it cannot)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"

# A stand-in for tests/support/containerd.py: a fixture defined in a module of that name.
CONTAINERD = """
import pytest

@pytest.fixture
def runtime():
    return "containerd"
"""


def test_a_test_is_marked_by_where_its_fixtures_are_defined(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(containerd=CONTAINERD)
    pytester.syspathinsert()
    pytester.makeconftest(
        "import importlib.util\n"
        'pytest_plugins = ["containerd"]\n'
        f"spec = importlib.util.spec_from_file_location('suite_conftest', {str(CONFTEST)!r})\n"
        "suite = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(suite)\n"
        "pytest_collection_modifyitems = suite.pytest_collection_modifyitems\n"
    )
    pytester.makepyfile(
        test_shared="def test_takes_it(runtime):\n    pass\n\ndef test_takes_none():\n    pass\n",
        test_own=(
            "import pytest\n\n@pytest.fixture\ndef runtime():\n    return 'its own'\n\n"
            "def test_takes_its_own(runtime):\n    pass\n"
        ),
    )
    items = pytester.inline_genitems()[0]
    marked = {item.name: item.get_closest_marker("needs_containerd") is not None for item in items}
    assert marked == {"test_takes_it": True, "test_takes_none": False, "test_takes_its_own": False}
