"""Typing and documentation of the package (issue 11): every module's .pyi stub defines
every name of its __all__ (and every module-level public function or class where a module
has no __all__), and every public callable, and every public method of a public class, has
a docstring."""
import ast
import importlib
import inspect
import pathlib

import pytest

MODULES = ["codec", "errors", "routes", "oracle", "planning", "sim", "torch", "pytest_plugin",
           "_tensors", "_torch_pg", "_torch_comm", "_checked"]


def public_names(mod):
    if hasattr(mod, "__all__"):
        return list(mod.__all__)
    return [n for n, v in vars(mod).items() if not n.startswith("_")
            and (inspect.isfunction(v) or inspect.isclass(v)) and v.__module__ == mod.__name__]


@pytest.mark.parametrize("module", MODULES)
def test_stubs_and_docstrings_cover_every_public_name(module):
    if module == "torch":
        pytest.importorskip("torch", reason="hpref.torch needs torch")
    if module in ("_torch_pg", "_torch_comm", "_checked"):
        pytest.importorskip("torch.distributed", reason=f"hpref.{module} needs torch.distributed")
    mod = importlib.import_module(f"hpref.{module}")
    tree = ast.parse(pathlib.Path(mod.__file__).with_suffix(".pyi").read_text())
    stubbed = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    stubbed |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
                if isinstance(t, ast.Name)}
    stubbed |= {n.target.id for n in tree.body if isinstance(n, ast.AnnAssign)}
    stubbed |= {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
    names = public_names(mod)
    assert set(names) <= stubbed, f"hpref.{module}: not in its .pyi: {sorted(set(names) - stubbed)}"
    for name in names:
        value = getattr(mod, name)
        if callable(value):
            assert (value.__doc__ or "").strip(), f"hpref.{module}.{name} has no docstring"
        if isinstance(value, type):
            for attr, member in vars(value).items():
                if not attr.startswith("_") and callable(member):
                    assert (member.__doc__ or "").strip(), f"hpref.{module}.{name}.{attr} has no docstring"
