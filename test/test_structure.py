"""The core's shape, read from its source with `ast`: no import circles, imports at the top of a module (but an
optional dependency's), no rclpy, and every module inside a subpackage named for what it holds."""

from __future__ import annotations

import ast
from pathlib import Path

CORE = Path(__file__).resolve().parents[1] / "sysid_ros" / "core"
DEFERRED = {"ray", "psutil", "plotly", "ament_index_python", "rosbags", "mcap", "zstandard", "ruamel"}
"""Imported where they are used: the optional ones, Ray (only with `--engine ray`; psutil comes with it and is
used only beside it), plotting (only for a report)
and the ament index (only in a ROS install); and the heavy ones only one path needs, the bag libraries and
round-trip YAML, because every node imports `bags.write` (its QoS) and would otherwise pay ~0.6 s at start-up.
Every other import, and every import of this package's own modules, is at the top of the module."""
SHARED_BASICS = {"__init__.py", "errors.py"}


def _modules() -> dict[str, tuple[Path, bool]]:
    """Dotted name -> (file, is a package's __init__) for every module of the core."""
    out = {}
    for path in CORE.rglob("*.py"):
        parts = list(path.relative_to(CORE.parent.parent).with_suffix("").parts)
        package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if package else parts)] = (path, package)
    return out


def _target(module: str, package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if package else module.split(".")[:-1]
    base = base[: len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(tree: ast.Module) -> tuple[list[ast.stmt], list[ast.stmt]]:
    """(imports run when the module loads, imports inside a function or class)."""
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    top += [
        m
        for n in tree.body
        if isinstance(n, (ast.If, ast.Try))
        for m in ast.walk(n)
        if isinstance(m, (ast.Import, ast.ImportFrom))
    ]
    inner = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) and n not in top]
    return top, inner


def _exports(modules: dict[str, tuple[Path, bool]]) -> dict[str, dict[str, str]]:
    """Package -> its front door's `EXPORTS` (name -> the defining module, absolute)."""
    out: dict[str, dict[str, str]] = {}
    for name, (path, package) in modules.items():
        for node in ast.parse(path.read_text()).body if package else ():
            if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "EXPORTS":
                out[name] = {
                    k.value: name + v.value if v.value.startswith(".") else v.value
                    for k, v in zip(node.value.keys, node.value.values)
                }
    return out


def _graph() -> dict[str, set[str]]:
    """Module -> the core modules loading it loads (a submodule's packages included); a name taken from a front
    door counts as an import of the module defining it (the door imports it on first use)."""
    modules = _modules()
    doors = _exports(modules)
    graph: dict[str, set[str]] = {}
    for name, (path, package) in modules.items():
        top, _ = _imports(ast.parse(path.read_text()))
        edges = set()
        for node in top:
            if isinstance(node, ast.ImportFrom):
                base = _target(name, package, node)
                targets = [
                    f"{base}.{a.name}" if f"{base}.{a.name}" in modules else doors.get(base, {}).get(a.name, base)
                    for a in node.names
                ]
            else:
                targets = [a.name for a in node.names]
            for target in targets:
                parts = target.split(".")
                for k in range(1, len(parts) + 1):  # importing a.b.c runs a, a.b and a.b.c
                    prefix = ".".join(parts[:k])
                    if prefix in modules and prefix != name and not name.startswith(prefix + "."):
                        edges.add(prefix)
        graph[name] = edges
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_callers_use_the_front_doors():
    """Outside a core package, its names are imported from the package (`from ..signals import JointSamples`),
    never from a module inside it; each door's `EXPORTS` names modules that define those names."""
    modules = _modules()
    doors = _exports(modules)
    reaching = []
    for name, (path, package) in {**modules, **_other_callers()}.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = _target(name, package, node)
            parts = base.split(".")
            door = ".".join(parts[:3])
            inside = name == door or name.startswith(door + ".")
            if len(parts) > 3 and parts[:2] == ["sysid_ros", "core"] and not inside:
                if not all(f"{base}.{a.name}" in modules for a in node.names):  # a module as a name is fine
                    reaching.append(f"{name}:{node.lineno} from {base}")
    assert reaching == []
    for door, names in doors.items():
        assert all(src in modules for src in names.values()), door


def _other_callers() -> dict[str, tuple[Path, bool]]:
    """The package's modules outside core/ (nodes, ros, cli, demo)."""
    package = CORE.parent
    return {
        ".".join(p.relative_to(package.parent).with_suffix("").parts): (p, False)
        for p in package.rglob("*.py")
        if not p.is_relative_to(CORE) and p.name != "__init__.py"
    }


def test_no_import_circles():
    """No two core modules need each other, through packages' `__init__` files included."""
    assert _cycles(_graph()) == []


def test_imports_at_the_top_but_optional_dependencies():
    """An import inside a function only for a deferred dependency (no import inside a function hides a circle)."""
    inside = []
    for name, (path, _) in _modules().items():
        _, inner = _imports(ast.parse(path.read_text()))
        for node in inner:
            root = (node.module if isinstance(node, ast.ImportFrom) else node.names[0].name) or ""
            if getattr(node, "level", 0) or root.split(".")[0] not in DEFERRED:
                inside.append(f"{name}:{node.lineno} {ast.unparse(node)}")
    assert inside == []


def test_core_never_imports_rclpy():
    """The core runs without ROS: no module imports rclpy, anywhere in it."""
    users = [
        name
        for name, (path, _) in _modules().items()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, (ast.Import, ast.ImportFrom))
        and any(
            n.split(".")[0] == "rclpy"
            for n in ([node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names])
        )
    ]
    assert users == []


def test_no_loose_modules_in_core():
    """Beside the subpackages, `core/` holds only the shared basics (the error family)."""
    assert {p.name for p in CORE.glob("*.py")} == SHARED_BASICS
    assert all((d / "__init__.py").is_file() for d in CORE.iterdir() if d.is_dir() and d.name != "__pycache__")


PACKAGE = CORE.parent
MAX_MODULES = 15


def _packages() -> list[Path]:
    return sorted(p.parent for p in PACKAGE.rglob("__init__.py") if "__pycache__" not in p.parts)


def test_every_subpackage_has_a_map():
    """Each package's docstring names its modules and subpackages, so a newcomer finds a thing from the names."""
    for package in _packages():
        doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
        names = [m.stem for m in package.glob("*.py") if m.stem not in ("__init__", "__main__")]
        names += [d.name for d in package.iterdir() if (d / "__init__.py").is_file()]
        missing = [n for n in names if f"`{n}`" not in doc and f"`{n}/`" not in doc]
        assert missing == [], f"{package.relative_to(PACKAGE.parent)}/__init__.py does not name {missing}"


def test_no_folder_holds_more_than_fifteen_modules():
    """A folder past 15 modules is split by role (issue 31: identify/ had 32)."""
    crowded = {
        str(p.relative_to(PACKAGE.parent)): n
        for p in _packages()
        if (n := len([m for m in p.glob("*.py") if m.stem != "__init__"])) > MAX_MODULES
    }
    assert crowded == {}


def test_no_test_only_code_in_the_runtime_package():
    """Every module of the package is reached from an entry point (a node, the CLI, the demo, a launch helper) or
    from a name a core package's front door offers (the library's API, e.g. the tuner's Stage 0 `analytic_start`,
    which no node calls): what only tests and benches use lives in `test/support/`."""
    modules = {
        ".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__"): p
        for p in PACKAGE.rglob("*.py")
        if "__pycache__" not in p.parts
    }
    entry = {m for m in modules if m.startswith("sysid_ros.nodes.") or m.startswith("sysid_ros.cli")}
    entry |= {"sysid_ros.demo", "sysid_ros.launching", "sysid_ros"}
    doors = _exports({m: (p, p.name == "__init__.py") for m, p in modules.items()})
    entry |= {source for names in doors.values() for source in names.values()}
    reached, todo = set(), list(entry)
    while todo:
        name = todo.pop()
        if name in reached or name not in modules:
            continue
        reached.add(name)
        path = modules[name]
        package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = _target(name, package, node)
                todo += [base] + [f"{base}.{a.name}" for a in node.names]
                todo += [doors[base][a.name] for a in node.names if a.name in doors.get(base, {})]
                parts = base.split(".")
                todo += [".".join(parts[:k]) for k in range(1, len(parts))]
            elif isinstance(node, ast.Import):
                for a in node.names:
                    parts = a.name.split(".")
                    todo += [".".join(parts[:k]) for k in range(1, len(parts) + 1)]
        for s in ast.walk(ast.parse(path.read_text())):  # modules named in strings (warm-up lists, -m targets)
            if isinstance(s, ast.Constant) and isinstance(s.value, str) and s.value in modules:
                todo.append(s.value)
    assert sorted(set(modules) - reached) == []


RETIRED_NAMES = {"window_s": ("segment_s", "horizon_s", "filter_window_s")}
"""Names that held several things, split into one name each (identify's segment length, the online estimator's
horizon, the derivative filter's width); the old name stands only in the maps that refuse it with the new one."""


def _retired_uses(tree: ast.Module, name: str) -> list[int]:
    """Lines naming `name` (a variable, argument, attribute, keyword or string) but as a key of a `renamed=` map."""
    allowed = {
        id(k)
        for n in ast.walk(tree)
        if isinstance(n, ast.keyword) and n.arg == "renamed" and isinstance(n.value, ast.Dict)
        for k in n.value.keys
    }
    uses = []
    for n in ast.walk(tree):
        named = (
            (isinstance(n, ast.Name) and n.id == name)
            or (isinstance(n, ast.arg) and n.arg == name)
            or (isinstance(n, ast.Attribute) and n.attr == name)
            or (isinstance(n, ast.keyword) and n.arg == name)
            or (isinstance(n, ast.Constant) and n.value == name and id(n) not in allowed)
        )
        if named:
            uses.append(n.lineno)
    return uses


def test_each_retired_name_is_gone_but_its_refusal():
    package = CORE.parent
    for name in RETIRED_NAMES:
        found = {
            str(p.relative_to(package)): lines
            for p in package.rglob("*.py")
            if (lines := _retired_uses(ast.parse(p.read_text()), name))
        }
        assert not found, f"{name} is retired ({' / '.join(RETIRED_NAMES[name])}), still used at {found}"


RUN_STAGES = ("load", "warm_start", "optimize", "intervals", "validation", "summarize")
"""The modules of `identify/stages/` that `identify/pipeline.py` runs in order, each owning one stage of the run."""


def test_the_identification_run_reads_as_its_stages():
    """`pipeline.py` imports the stage modules and the types it hands on (`problem`, `results`), nothing else of
    the package: a stage's helpers live in its module (a newcomer following the run opens six files, not 16)."""
    tree = ast.parse((CORE / "identify" / "pipeline.py").read_text())
    own = {node.module for node in tree.body if isinstance(node, ast.ImportFrom) and node.level == 1}
    assert own == {*(f"stages.{stage}" for stage in RUN_STAGES), "problem.file", "results"}, own


LEVELS = {"debug", "info", "warn", "warning", "error", "fatal"}


def test_every_logging_call_site_has_one_severity():
    """rclpy raises ValueError when one call site logs at a second severity (`(log.info if ok else log.error)(m)`):
    in a callback that kills the node. Each severity gets its own call."""
    chosen = []
    for path in sorted(CORE.parent.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.IfExp):
                branches = (node.func.body, node.func.orelse)
                if any(isinstance(b, ast.Attribute) and b.attr in LEVELS for b in branches):
                    chosen.append(f"{path.relative_to(CORE.parent.parent)}:{node.lineno}")
    assert not chosen, chosen


def test_no_test_or_bench_imports_a_test_file():
    """What several tests or benches share lives in `test/support/` (or conftest fixtures), never in a test file."""
    repo = CORE.parents[1]
    found = []
    for path in [*repo.glob("test/**/*.py"), *repo.glob("bench/*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            found += [f"{path.relative_to(repo)}:{node.lineno}" for n in names if n.split(".")[-1].startswith("test_")]
    assert found == []
