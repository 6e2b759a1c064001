"""A small evaluator for the Go composite literals of KAI's table-driven tests.

It reads Go with tree-sitter and evaluates what the test tables are made of: literals,
composite literals (structs become `GoStruct`, slices lists, maps dicts), package
constants, pointer helpers (`ptr.To`, `pointer.Int`, ...), arithmetic, durations, and the
SubGroup builders (`subgroup_info.NewSubGroupSet`, `NewPodSet`, `AddPodSet`,
`AddSubGroup`, `SetMinSubGroup`, `jobs_fake.DefaultSubGroup`), including the
`func() T { ...; return x }()` closures the tables build them in, and helper functions
made of simple statements: `make` of an empty map or slice, `append`, assignments (to
variables, map entries and struct fields, an embedded struct's promoted ones included),
`++`/`--`, and three-clause `for` loops (how KAI's tables build node maps, and how a few
tests build a whole case before the harness takes it, `run_until_harness`). Anything else
raises `UnsupportedError` with the construct, so a case is reported, never guessed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import tree_sitter_go
from tree_sitter import Language, Node, Parser

GO = Language(tree_sitter_go.language())
PARSER = Parser(GO)


class UnsupportedError(Exception):
    """A construct the evaluator does not handle."""


class GoStruct(dict[str, Any]):
    """A struct value: its fields by name, and the (last part of the) type name."""

    def __init__(self, type_name: str | None) -> None:
        super().__init__()
        self.type_name = type_name


@dataclass
class PodSet:
    name: str
    min_available: int
    topology: Any = None


@dataclass
class SubGroupSet:
    name: str
    topology: Any = None
    min_sub_group: int | None = None
    pod_sets: list[PodSet] = field(default_factory=list)
    children: list[SubGroupSet] = field(default_factory=list)


HARNESS_CALL = re.compile(r"\b(BuildSession|RunTests?)\(")
HARNESS_SETUP = re.compile(r"\b(InitTestingInfrastructure|NewController)\(")

SECOND = 1.0
MAX_LOOP_ITERATIONS = 10_000
CONSTANTS: dict[str, Any] = {
    "constants.PriorityTrainNumber": 50,
    "constants.PriorityInteractivePreemptibleNumber": 75,
    "constants.PriorityBuildNumber": 100,
    "constants.PriorityInferenceNumber": 125,
    "commonconstants.DefaultQueuePriority": 100,
    "commonconstants.DefaultQueueLabel": "kai.scheduler/queue",
    "constants.PodGroupAnnotationForPod": "pod-group-name",
    "common_info.NoMaxAllowedResource": -1,
    "subgroup_info.RootSubGroupSetName": "",
    "podgroup_info.DefaultSubGroup": "default",
    "tasks_fake.NodeAffinityKey": "kai.scheduler/type",
    "v2alpha2.Preemptible": "preemptible",
    "v2alpha2.NonPreemptible": "non-preemptible",
    "enginev2alpha2.Preemptible": "preemptible",
    "enginev2alpha2.NonPreemptible": "non-preemptible",
    "time.Nanosecond": 1e-9 * SECOND,
    "time.Microsecond": 1e-6 * SECOND,
    "time.Millisecond": 1e-3 * SECOND,
    "time.Second": SECOND,
    "time.Minute": 60 * SECOND,
    "time.Hour": 3600 * SECOND,
    "constants.SpreadStrategy": "spread",
    "constants.BinpackStrategy": "binpack",
    "constants.GPUResource": "gpu",
    "constants.CPUResource": "cpu",
}
# Identity conversions and pointer helpers: the value is what matters.
PASS_THROUGH = {
    "ptr.To",
    "pointer.Int",
    "pointer.Int32",
    "pointer.Int64",
    "pointer.Float64",
    "pointer.Duration",
    "pointer.String",
    "pointer.Bool",
    "test_utils.CreateFloat64Pointer",
    "int",
    "int32",
    "int64",
    "uint64",
    "float64",
    "string",
    "time.Duration",
    "common_info.PodGroupID",
    "common_info.QueueID",
    "common_info.PodID",
    "v1.ResourceName",
}


def text(node: Node) -> str:
    return node.text.decode() if node.text is not None else ""


class Scope:
    """Names visible to an expression: lazily evaluated declarations, innermost first."""

    def __init__(self, evaluator: Evaluator, parent: Scope | None = None) -> None:
        self.evaluator = evaluator
        self.parent = parent
        self.nodes: dict[str, Node] = {}
        self.values: dict[str, Any] = {}

    def lookup(self, name: str) -> Any:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.values:
                return scope.values[name]
            if name in scope.nodes:
                node = scope.nodes.pop(name)
                scope.values[name] = self.evaluator.eval(node, scope)
                return scope.values[name]
            scope = scope.parent
        raise UnsupportedError(f"unknown identifier {name}")

    def assign(self, name: str, value: Any) -> None:
        """Set a variable in the scope that declares it."""
        scope: Scope | None = self
        while scope is not None:
            if name in scope.values or name in scope.nodes:
                scope.nodes.pop(name, None)
                scope.values[name] = value
                return
            scope = scope.parent
        raise UnsupportedError(f"assignment to undeclared {name}")


class Evaluator:
    def __init__(self, source: bytes) -> None:
        self.tree = PARSER.parse(source)
        self.root = self.tree.root_node
        self.file_scope = Scope(self)
        self.functions: dict[str, Node] = {}
        for child in self.root.children:
            if child.type in ("const_declaration", "var_declaration"):
                self._declare(child, self.file_scope)
            elif child.type == "function_declaration":
                name = child.child_by_field_name("name")
                if name is not None:
                    self.functions[text(name)] = child

    def _declare(self, decl: Node, scope: Scope) -> None:
        for spec in decl.named_children:
            if spec.type in ("const_spec", "var_spec"):
                names = [c for c in spec.children_by_field_name("name")]
                value = spec.child_by_field_name("value")
                if value is None:  # Go's zero value, for the kinds tests build up from it
                    kind = _type_kind(spec.child_by_field_name("type"))
                    if kind in ("slice", "map"):
                        scope.values.update(
                            (text(name), [] if kind == "slice" else {}) for name in names
                        )
                    continue
                values = value.named_children if value.type == "expression_list" else [value]
                for name, val in zip(names, values, strict=False):
                    scope.nodes[text(name)] = val
            elif spec.type in ("const_spec_list", "var_spec_list"):
                self._declare(spec, scope)

    def function_scope(self, function: Node) -> Scope:
        """The file scope plus the function's own simple declarations, for tables built inside it."""
        scope = Scope(self, self.file_scope)
        body = function.child_by_field_name("body")
        if body is not None:
            for statement in _statements(body):
                if statement.type == "short_var_declaration":
                    left = statement.child_by_field_name("left")
                    right = statement.child_by_field_name("right")
                    if left is None or right is None:
                        continue
                    for name, val in zip(left.named_children, right.named_children, strict=False):
                        scope.nodes[text(name)] = val
                elif statement.type in ("const_declaration", "var_declaration"):
                    self._declare(statement, scope)
        return scope

    def reassigned_locals(self, function: Node) -> set[str]:
        """The function's own variables that its statements change after declaring them.

        `function_scope` sees only the declarations, so a table built up by later
        statements (`test.Jobs = append(test.Jobs, ...)` in a loop) would read as empty.
        """
        body = function.child_by_field_name("body")
        if body is None:
            return set()
        declared = set(self.function_scope(function).nodes)
        changed: set[str] = set()
        todo = [body]
        while todo:
            node = todo.pop()
            targets: list[Node] = []
            if node.type == "assignment_statement":
                left = node.child_by_field_name("left")
                targets = left.named_children if left is not None else []
            elif node.type in ("inc_statement", "dec_statement"):
                targets = node.named_children[:1]
            for target in targets:
                root: Node | None = target
                while root is not None and root.type in ("selector_expression", "index_expression"):
                    root = root.child_by_field_name("operand")
                if root is not None and root.type == "identifier" and text(root) in declared:
                    changed.add(text(root))
            todo += node.named_children
        return changed

    # --- expressions -------------------------------------------------------------------

    def eval(self, node: Node, scope: Scope) -> Any:
        method: Callable[[Node, Scope], Any] | None = getattr(self, f"_e_{node.type}", None)
        if method is None:
            raise UnsupportedError(f"{node.type}: {text(node)[:80]}")
        return method(node, scope)

    def _e_literal_element(self, node: Node, scope: Scope) -> Any:
        return self.eval(node.named_children[0], scope)

    def _e_parenthesized_expression(self, node: Node, scope: Scope) -> Any:
        return self.eval(node.named_children[0], scope)

    def _e_int_literal(self, node: Node, scope: Scope) -> Any:
        return int(text(node).replace("_", ""), 0)

    def _e_float_literal(self, node: Node, scope: Scope) -> Any:
        return float(text(node).replace("_", ""))

    def _e_interpreted_string_literal(self, node: Node, scope: Scope) -> Any:
        raw = text(node)[1:-1]
        escapes = {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}
        return re.sub(r"\\(.)", lambda m: escapes.get(m.group(1), m.group(0)), raw)

    def _e_raw_string_literal(self, node: Node, scope: Scope) -> Any:
        return text(node)[1:-1]

    def _e_true(self, node: Node, scope: Scope) -> Any:
        return True

    def _e_false(self, node: Node, scope: Scope) -> Any:
        return False

    def _e_nil(self, node: Node, scope: Scope) -> Any:
        return None

    def _e_identifier(self, node: Node, scope: Scope) -> Any:
        return scope.lookup(text(node))

    def _e_selector_expression(self, node: Node, scope: Scope) -> Any:
        name = text(node)
        if name in CONSTANTS:
            return CONSTANTS[name]
        operand = node.child_by_field_name("operand")
        if operand is not None and operand.type == "identifier":
            local = _local(scope, text(operand))
            if isinstance(local, GoStruct):  # test.Jobs, where the test builds its case
                field_name = text(node.child_by_field_name("field"))  # type: ignore[arg-type]
                return _holder(local, field_name).get(field_name)
            # pod_status.Running, node_info.MigStrategyMixed, v1.PodQOSGuaranteed, ...: symbolic.
            return Symbol(name)
        raise UnsupportedError(f"selector {name}")

    def _e_unary_expression(self, node: Node, scope: Scope) -> Any:
        operator = text(node.child_by_field_name("operator") or node.children[0])
        value = self.eval(node.child_by_field_name("operand") or node.named_children[-1], scope)
        if operator == "&":
            return value
        if operator == "-":
            return -value
        if operator == "+":
            return value
        raise UnsupportedError(f"unary {operator}")

    def _e_binary_expression(self, node: Node, scope: Scope) -> Any:
        left = self.eval(node.child_by_field_name("left"), scope)  # type: ignore[arg-type]
        right = self.eval(node.child_by_field_name("right"), scope)  # type: ignore[arg-type]
        operator = text(node.child_by_field_name("operator"))  # type: ignore[arg-type]
        return _apply(operator, left, right, text(node))

    def _e_index_expression(self, node: Node, scope: Scope) -> Any:
        container = self.eval(node.child_by_field_name("operand"), scope)  # type: ignore[arg-type]
        key = self.eval(node.child_by_field_name("index"), scope)  # type: ignore[arg-type]
        try:
            return container[key]
        except (KeyError, IndexError, TypeError) as error:
            raise UnsupportedError(f"index {text(node)[:60]}") from error

    def _e_composite_literal(self, node: Node, scope: Scope) -> Any:
        type_node = node.child_by_field_name("type")
        body = node.child_by_field_name("body")
        assert type_node is not None and body is not None
        return self.literal(body, type_node, scope)

    def _e_literal_value(self, node: Node, scope: Scope) -> Any:
        return self.literal(node, None, scope)

    def literal(self, body: Node, type_node: Node | None, scope: Scope) -> Any:
        kind = _type_kind(type_node)
        elements = [
            c for c in body.named_children if c.type in ("keyed_element", "literal_element")
        ]
        if kind == "slice":
            element_type = _element_type(type_node)
            return [self.typed(e, element_type, scope) for e in elements]
        if kind == "map":
            value_type = type_node.child_by_field_name("value") if type_node else None
            result: dict[Any, Any] = {}
            for element in elements:
                if element.type != "keyed_element":
                    raise UnsupportedError("map element without key")
                key_node, value_node = _key_value(element)
                result[self.eval(key_node, scope)] = self.typed(value_node, value_type, scope)
            return result
        struct = GoStruct(_type_name(type_node))
        for element in elements:
            if element.type != "keyed_element":
                # An untyped element list with no keys: a slice whose type we do not know.
                return [self.typed(e, None, scope) for e in elements]
            key_node, value_node = _key_value(element)
            key_inner = (
                key_node.named_children[0] if key_node.type == "literal_element" else key_node
            )
            if key_inner.type in ("identifier", "field_identifier"):
                struct[text(key_inner)] = self.typed(value_node, None, scope)
            else:  # an untyped map literal nested in a struct field
                mapping = {
                    self.eval(_key_value(e)[0], scope): self.typed(_key_value(e)[1], None, scope)
                    for e in elements
                }
                return mapping
        return struct

    def typed(self, node: Node, type_node: Node | None, scope: Scope) -> Any:
        inner = node.named_children[0] if node.type == "literal_element" else node
        if inner.type == "literal_value":
            return self.literal(inner, type_node, scope)
        return self.eval(inner, scope)

    def _e_call_expression(self, node: Node, scope: Scope) -> Any:
        function = node.child_by_field_name("function")
        arguments = node.child_by_field_name("arguments")
        assert function is not None and arguments is not None
        if function.type == "func_literal":
            return self.run_block(function.child_by_field_name("body"), Scope(self, scope))
        name = text(function)
        if name == "make":
            return _make(arguments)
        if name == "append":
            first, *rest = [self.eval(a, scope) for a in arguments.named_children]
            if not isinstance(first, list | type(None)):
                raise UnsupportedError(f"append to {text(arguments)[:60]}")
            return [*(first or []), *rest]
        args = [self.eval(a, scope) for a in arguments.named_children if a.type != "type_arguments"]
        if name in PASS_THROUGH:
            if len(args) != 1:
                raise UnsupportedError(f"{name} with {len(args)} arguments")
            return args[0]
        if name == "jobs_fake.DefaultSubGroup":
            root = SubGroupSet("")
            root.pod_sets.append(PodSet("default", int(args[0])))
            return root
        if name == "subgroup_info.NewSubGroupSet":
            return SubGroupSet(str(args[0]), args[1] if len(args) > 1 else None)
        if name == "subgroup_info.NewPodSet":
            return PodSet(str(args[0]), int(args[1]), args[2] if len(args) > 2 else None)
        if name == "fmt.Sprintf":
            return _sprintf(str(args[0]), args[1:])
        if function.type == "selector_expression":
            operand = function.child_by_field_name("operand")
            method = text(function.child_by_field_name("field"))  # type: ignore[arg-type]
            if operand is not None and operand.type == "identifier":
                try:
                    target = scope.lookup(text(operand))
                except UnsupportedError:
                    target = None
                if isinstance(target, SubGroupSet):
                    if method == "AddPodSet":
                        target.pod_sets.append(args[0])
                        return None
                    if method == "AddSubGroup":
                        target.children.append(args[0])
                        return None
                    if method == "SetMinSubGroup":
                        target.min_sub_group = None if args[0] is None else int(args[0])
                        return None
        if function.type == "identifier" and name in self.functions:
            return self.call_function(self.functions[name], args)
        raise UnsupportedError(f"call {name}(...)")

    def call_function(self, function: Node, args: list[Any]) -> Any:
        scope = Scope(self, self.file_scope)
        parameters = function.child_by_field_name("parameters")
        names = []
        for declaration in parameters.named_children if parameters else []:
            names += [text(n) for n in declaration.children_by_field_name("name")]
        if len(names) != len(args):
            name = text(function.child_by_field_name("name"))  # type: ignore[arg-type]
            raise UnsupportedError(f"call of {name} with variadic args")
        scope.values.update(zip(names, args, strict=True))
        return self.run_block(function.child_by_field_name("body"), scope)

    def run_until_harness(self, function: Node) -> Scope:
        """Run a Test function's statements that build its case, in order, and return its scope.

        A test that builds its case with statements (make, append, loops) then hands it to
        the harness: the run stops at the first harness call (`BuildSession`, `RunTests`),
        and skips the harness's setup (`InitTestingInfrastructure`, `NewController`, defers).
        """
        scope = Scope(self, self.file_scope)
        body = function.child_by_field_name("body")
        for statement in _statements(body) if body is not None else []:
            source = text(statement)
            if HARNESS_CALL.search(source):
                break
            if statement.type == "defer_statement" or HARNESS_SETUP.search(source):
                continue
            if statement.type == "for_statement":
                self._run_for(statement, scope)
            else:
                self._run_simple(statement, scope)
        return scope

    def run_block(self, block: Node | None, scope: Scope) -> Any:
        """Run a function body: simple statements, `for` loops, and one return."""
        if block is None:
            raise UnsupportedError("function without body")
        return self._run_statements(block, scope)[1]

    def _run_statements(self, block: Node, scope: Scope) -> tuple[bool, Any]:
        """(whether a return was reached, its value)."""
        for statement in _statements(block):
            if statement.type == "return_statement":
                values = statement.named_children
                if not values:
                    return True, None
                inner = values[0]
                if inner.type == "expression_list":
                    inner = inner.named_children[0]
                return True, self.eval(inner, scope)
            if statement.type == "for_statement":
                returned, value = self._run_for(statement, scope)
                if returned:
                    return True, value
            else:
                self._run_simple(statement, scope)
        return False, None

    def _run_for(self, statement: Node, scope: Scope) -> tuple[bool, Any]:
        clause = statement.named_children[0]
        if clause.type != "for_clause" or clause.child_by_field_name("condition") is None:
            raise UnsupportedError(f"for loop other than `for init; cond; post`: {text(clause)}")
        condition = clause.child_by_field_name("condition")
        initializer = clause.child_by_field_name("initializer")
        update = clause.child_by_field_name("update")
        body = statement.child_by_field_name("body")
        assert condition is not None and body is not None
        loop = Scope(self, scope)
        if initializer is not None:
            self._run_simple(initializer, loop)
        for _ in range(MAX_LOOP_ITERATIONS):
            if not self.eval(condition, loop):
                return False, None
            returned, value = self._run_statements(body, Scope(self, loop))
            if returned:
                return True, value
            if update is not None:
                self._run_simple(update, loop)
        raise UnsupportedError(f"loop runs over {MAX_LOOP_ITERATIONS} iterations")

    def _run_simple(self, statement: Node, scope: Scope) -> None:
        if statement.type == "short_var_declaration":
            left = statement.child_by_field_name("left")
            right = statement.child_by_field_name("right")
            assert left is not None and right is not None
            for name, val in zip(left.named_children, right.named_children, strict=True):
                scope.values[text(name)] = self.eval(val, scope)
        elif statement.type in ("var_declaration", "const_declaration"):
            self._declare(statement, scope)
        elif statement.type == "expression_statement":
            self.eval(statement.named_children[0], scope)
        elif statement.type in ("inc_statement", "dec_statement"):
            target = statement.named_children[0]
            step = 1 if statement.type == "inc_statement" else -1
            self._store(target, self.eval(target, scope) + step, scope)
        elif statement.type == "assignment_statement":
            left = statement.child_by_field_name("left")
            right = statement.child_by_field_name("right")
            operator = text(statement.child_by_field_name("operator"))  # type: ignore[arg-type]
            assert left is not None and right is not None
            values = [self.eval(v, scope) for v in right.named_children]
            for target, value in zip(left.named_children, values, strict=True):
                if operator == "=":
                    self._store(target, value, scope)
                else:
                    current = self.eval(target, scope)
                    self._store(
                        target, _apply(operator[:-1], current, value, text(statement)), scope
                    )
        else:
            raise UnsupportedError(f"statement {statement.type} in a function body")

    def _store(self, target: Node, value: Any, scope: Scope) -> None:
        if target.type == "identifier":
            scope.assign(text(target), value)
        elif target.type == "selector_expression":
            container = self.eval(target.child_by_field_name("operand"), scope)  # type: ignore[arg-type]
            if not isinstance(container, GoStruct):
                raise UnsupportedError(f"assignment to {text(target)[:60]}")
            field_name = text(target.child_by_field_name("field"))  # type: ignore[arg-type]
            _holder(container, field_name)[field_name] = value
        elif target.type == "index_expression":
            container = self.eval(target.child_by_field_name("operand"), scope)  # type: ignore[arg-type]
            key = self.eval(target.child_by_field_name("index"), scope)  # type: ignore[arg-type]
            if not isinstance(container, dict | list):
                raise UnsupportedError(f"assignment to {text(target)[:60]}")
            container[key] = value
        else:
            raise UnsupportedError(f"assignment to {text(target)[:60]}")


@dataclass(frozen=True)
class Symbol:
    """A package-level name the tests use as an enum value (pod_status.Running, ...)."""

    name: str

    @property
    def short(self) -> str:
        return self.name.rsplit(".", 1)[-1]


COMPARISONS: dict[str, Callable[[Any, Any], bool]] = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}


def _apply(operator: str, left: Any, right: Any, source: str) -> Any:
    """A Go binary operator on evaluated operands (`source` names the expression in errors)."""
    if operator in COMPARISONS:
        if not all(isinstance(v, int | float | str) for v in (left, right)):
            raise UnsupportedError(f"comparison {source[:60]}")
        return COMPARISONS[operator](left, right)
    if not all(isinstance(v, int | float) for v in (left, right)):
        if operator == "+" and isinstance(left, str) and isinstance(right, str):
            return left + right
        raise UnsupportedError(f"binary {source[:60]}")
    if operator == "*":
        return left * right
    if operator == "+":
        return left + right
    if operator == "-":
        return left - right
    if operator == "/":
        return (
            left / right if isinstance(left, float) or isinstance(right, float) else left // right
        )
    raise UnsupportedError(f"binary operator {operator}")


def _holder(struct: GoStruct, name: str) -> GoStruct:
    """The struct that holds field `name`: `struct`, or the embedded struct Go promotes it
    from (`test.Nodes` of a TestTopologyMetadata is its TestTopologyBasic's)."""
    if name in struct:
        return struct
    for key, value in struct.items():
        if isinstance(value, GoStruct) and value.type_name == key:
            inner = _holder(value, name)
            if name in inner:
                return inner
    return struct


def _local(scope: Scope, name: str) -> Any:
    """The value of a variable in scope, or None when `name` is none (a package name)."""
    try:
        return scope.lookup(name)
    except UnsupportedError:
        return None


def _make(arguments: Node) -> Any:
    """`make(map[K]V)` or `make([]T, 0[, capacity])`: an empty map or slice."""
    type_node, *sizes = arguments.named_children
    kind = _type_kind(type_node)
    if kind == "map":
        return {}
    if kind == "slice" and (not sizes or text(sizes[0]) == "0"):
        return []
    raise UnsupportedError(f"make({text(arguments)[1:-1][:60]})")


def _statements(block: Node) -> list[Node]:
    out: list[Node] = []
    for child in block.named_children:
        if child.type == "statement_list":
            out += [c for c in child.named_children]
        else:
            out.append(child)
    return [c for c in out if c.type != "comment"]


def _key_value(element: Node) -> tuple[Node, Node]:
    key = element.child_by_field_name("key")
    value = element.child_by_field_name("value")
    if key is None or value is None:
        named = [c for c in element.named_children if c.type != "comment"]
        key, value = named[0], named[-1]
    return key, value


def _type_kind(type_node: Node | None) -> str:
    if type_node is None:
        return "unknown"
    if type_node.type in ("slice_type", "array_type", "implicit_length_array_type"):
        return "slice"
    if type_node.type == "map_type":
        return "map"
    return "struct"


def _element_type(type_node: Node | None) -> Node | None:
    if type_node is None:
        return None
    element = type_node.child_by_field_name("element")
    while element is not None and element.type == "pointer_type":
        element = element.named_children[0]
    return element


def _type_name(type_node: Node | None) -> str | None:
    if type_node is None:
        return None
    while type_node.type == "pointer_type":
        type_node = type_node.named_children[0]
    return text(type_node).rsplit(".", 1)[-1]


def _sprintf(template: str, args: list[Any]) -> str:
    values = iter(args)

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "%%":
            return "%"
        return str(next(values))

    return re.sub(r"%%|%[-+# 0-9.]*[dsvqf]", replace, template)
