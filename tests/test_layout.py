"""The package's rooms: each stage imports only from the stages before it, nothing under `models/` imports the
rest of the package (the Hub's custom code needs only torch and transformers), and no module imports
itself back through others."""

import ast
from pathlib import Path

import tf2rnn_hf

ROOT = Path(tf2rnn_hf.__file__).parent
# Each stage may import from its own and earlier stages only.
STAGES = ["utils", "models", "inference", "data", "evaluation", "hub", "distill", "plotting", "demo", "cli"]


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set:
    """Every tf2rnn_hf module `path` imports, at any depth of the file (function bodies too)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("tf2rnn_hf"):
                found.add(target)
                found.update(f"{target}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("tf2rnn_hf"))
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module":
            found.add("<import_module>")  # imports by name dodge this check: none allowed
    modules = {_module_name(p) for p in ROOT.rglob("*.py")}
    return {m for m in found if m in modules or m == "<import_module>"} - {name}


GRAPH = {_module_name(p): _imports(p) for p in ROOT.rglob("*.py") if "metrics" not in p.parts}


def _stage(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_models_import_nothing_else_of_the_package():
    for module, deps in GRAPH.items():
        if _stage(module) == "models":
            assert all(_stage(d) == "models" for d in deps), (module, deps)
            for path in (ROOT / "models").rglob("*.py"):
                tree = ast.parse(path.read_text())
                roots = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
                roots |= {n.module.split(".")[0] for n in ast.walk(tree)
                          if isinstance(n, ast.ImportFrom) and n.module and not n.level}
                assert roots <= {"json", "math", "os", "dataclasses", "pathlib", "typing", "torch", "transformers"}, (
                    path, roots)


def test_stages_import_only_earlier_stages():
    for module, deps in GRAPH.items():
        stage = _stage(module)
        if stage == "__init__":
            continue
        assert "<import_module>" not in deps, module
        for dep in deps:
            assert STAGES.index(_stage(dep)) <= STAGES.index(stage), f"{module} imports {dep}"


def test_no_import_cycles():
    state = {}

    def visit(module, path):
        if state.get(module) == "done":
            return
        assert state.get(module) != "open", "import cycle: " + " -> ".join(path + [module])
        state[module] = "open"
        for dep in GRAPH.get(module, ()):
            # A package's __init__ re-exports its modules; importing the package from inside is no cycle.
            if not module.startswith(dep + "."):
                visit(dep, path + [module])
        state[module] = "done"

    for module in GRAPH:
        visit(module, [])
