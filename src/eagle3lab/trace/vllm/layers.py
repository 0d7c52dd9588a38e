"""Which target layers vLLM captures for an EAGLE-3 drafter's layer ids, per release, read from its source.

Three facts decide it, and each is read here rather than assumed: where the runner reads the drafter's ids
(``eagle_aux_hidden_state_layer_ids`` at the top of the draft config's ``hf_config``, or also under its
``eagle_config``, as SpecForge writes them), whether it changes them on the way (vLLM uses them as given, PR
#43671 discusses the difference with sglang's +1), and where the target model's forward captures: before layer
``i`` runs (its input, i.e. layer ``i - 1``'s output). When no ids are found, the protocol's getter gives defaults,
``(2, n // 2, n - 3)`` in these releases, evaluated here from its own source.
"""

from __future__ import annotations

import ast
from dataclasses import asdict, dataclass
from typing import Any, Optional, Sequence

from eagle3lab.trace.sources import SglangSource

IDS_ATTR = "eagle_aux_hidden_state_layer_ids"
NESTED = "eagle_config"
READERS = ("_get_eagle3_aux_layers_from_config", "get_eagle3_aux_layers_from_config")  # V1 runner, Model Runner V2
TARGET_MODEL = ("model_executor/models/deepseek_v2.py", "DeepseekV2Model")  # Kimi-K2.5's language model
INTERFACES = "model_executor/models/interfaces.py"
DEFAULT_GETTERS = ("get_eagle3_default_aux_hidden_state_layers", "get_eagle3_aux_hidden_state_layers")


@dataclass(frozen=True)
class Reader:
    """One function of the runtime that reads a drafter's ids (the V1 runner's and Model Runner V2's differ)."""

    where: str
    top_level: bool  # reads hf_config.eagle_aux_hidden_state_layer_ids
    nested: bool  # also reads eagle_config["eagle_aux_hidden_state_layer_ids"]
    shift: int  # added to each id on the way (0: as given)


@dataclass(frozen=True)
class Convention:
    """How one release turns a drafter's ids into captured layers."""

    version: str
    readers: tuple[Reader, ...]
    capture: str  # "input" (layer i's input is captured) or "output"; "" when Kimi's language model captures none
    capture_where: str
    default_expr: str  # the getter's return expression, in num_layers

    def captured(self, reader: Optional[Reader], ids: Optional[Sequence[int]], depth: int,
                 nested_only: bool = False) -> dict[str, Any]:
        """The layers whose *input* is captured (layer i's input is layer i-1's output) for ids as a drafter config
        gives them (``nested_only``: only under eagle_config) on a target of ``depth`` layers."""
        read = ids is not None and reader is not None and (reader.nested if nested_only else reader.top_level)
        used = [i + reader.shift for i in ids] if read and ids is not None and reader is not None \
            else self.defaults(depth)
        if not self.capture:
            return {"ids_read": read, "ids_used": used, "inputs_of_layers": None, "outputs_of_layers": None}
        inputs = used if self.capture == "input" else [i + 1 for i in used]
        return {"ids_read": read, "ids_used": used, "inputs_of_layers": inputs,
                "outputs_of_layers": [i - 1 for i in inputs]}

    def defaults(self, depth: int) -> list[int]:
        if not self.default_expr:
            return []
        value = eval(compile(ast.parse(self.default_expr, mode="eval"), "<default>", "eval"),  # noqa: S307
                     {"__builtins__": {}}, {"num_layers": depth})
        return [int(v) for v in value]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _functions(src: SglangSource, names: Sequence[str]) -> list[tuple[str, ast.FunctionDef]]:
    found = []
    for path in src.files("v1"):
        text = src.text(path)
        if not any(f"def {n}(" in text for n in names):
            continue
        tree = src.tree(path)
        for node in ast.walk(tree) if tree is not None else []:
            if isinstance(node, ast.FunctionDef) and node.name in names:
                found.append((path, node))
    return sorted(found, key=lambda f: f[0])


def _reader(path: str, func: ast.FunctionDef) -> Reader:
    """What one reader does with EAGLE-3's ids: top-level, nested under eagle_config, shifted or not."""
    top = any(isinstance(n, ast.Constant) and n.value == IDS_ATTR for n in ast.walk(func)
              if not _inside_get(func, n))
    nested = NESTED in ast.unparse(func) and any(
        isinstance(c, ast.Call) and ast.unparse(c.func).endswith(".get") and c.args
        and isinstance(c.args[0], ast.Constant) and c.args[0].value == IDS_ATTR for c in ast.walk(func))
    shift = 0
    for comp in (n for n in ast.walk(func) if isinstance(n, ast.ListComp)):
        elt = comp.elt
        if (IDS_ATTR in ast.unparse(comp.generators[0].iter) and isinstance(elt, ast.BinOp)
                and isinstance(elt.op, ast.Add) and isinstance(elt.right, ast.Constant)):
            shift = int(elt.right.value)  # type: ignore[arg-type]
    return Reader(f"{path}:{func.lineno}", top, nested, shift)


def _inside_get(func: ast.FunctionDef, node: ast.AST) -> bool:
    """``node`` is the key of a ``.get("...")`` call (a nested read, not the top-level attribute)."""
    return any(isinstance(c, ast.Call) and ast.unparse(c.func).endswith(".get") and c.args and c.args[0] is node
               for c in ast.walk(func))


def _capture_point(src: SglangSource) -> tuple[str, str]:
    """Where the target's forward captures: before the layer call ("input") or after it ("output")."""
    path, cls = TARGET_MODEL
    tree = src.tree(path) if src.exists(path) else None
    model = next((n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls), None) if tree else None
    forward = next((n for n in model.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None) \
        if model is not None else None
    for loop in (n for n in ast.walk(forward) if isinstance(n, ast.For)) if forward is not None else []:
        body = ast.unparse(loop)
        if "aux_hidden_state" not in body:
            continue
        capture_at = next((s.lineno for s in loop.body if "aux_hidden_state" in ast.unparse(s)), loop.lineno)
        layer_at = next((s.lineno for s in loop.body if "layer(" in ast.unparse(s)), loop.lineno)
        shifted = "idx + 1" in body or "i + 1" in body
        before = capture_at < layer_at
        return ("input" if before or shifted else "output"), f"{path}:{capture_at}"
    return "", ""


def _default_expr(src: SglangSource) -> str:
    tree = src.tree(INTERFACES) if src.exists(INTERFACES) else None
    proto = next((n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "SupportsEagle3"), None) \
        if tree is not None else None
    for name in DEFAULT_GETTERS:
        func = next((n for n in proto.body if isinstance(n, ast.FunctionDef) and n.name == name), None) \
            if proto is not None else None
        ret = next((n for n in ast.walk(func) if isinstance(n, ast.Return) and n.value is not None), None) \
            if func is not None else None
        if ret is not None and ret.value is not None and "num_layers" in ast.unparse(ret.value):
            return ast.unparse(ret.value)
    path, _ = TARGET_MODEL  # before the defaults moved into the protocol: the model's own getter
    tree = src.tree(path) if src.exists(path) else None
    for node in ast.walk(tree) if tree is not None else []:
        if isinstance(node, ast.FunctionDef) and node.name in DEFAULT_GETTERS:
            ret = next((n for n in ast.walk(node) if isinstance(n, ast.Return) and n.value is not None), None)
            if ret is not None and ret.value is not None:
                return ast.unparse(ret.value)
    return ""


def convention(src: SglangSource) -> Convention:
    """The release's layer convention for EAGLE-3 targets (Kimi-K2.5's language model's forward)."""
    readers = tuple(_reader(p, f) for p, f in _functions(src, READERS) if IDS_ATTR in ast.unparse(f))
    capture, where = _capture_point(src)
    return Convention(src.version, readers, capture, where, _default_expr(src))
