"""One module sends kube-nudge's PATCH requests (``kube/patches.py``): every other module
describes its change as a ``Patch`` and hands it there, so the field manager, the patch
type and the preconditions in its body are set in one place. The product has no
``merge_patch`` nor server-side ``apply`` at all: the tests, the bench and the demo
merge-patch through the dev tools' admin client (``kube_nudge_dev.admin.AdminClient``, the
product's ``KubeClient`` plus ``delete`` and ``merge_patch``). The reload agent, a separate
standard-library process that writes only its own pod, is outside the one-writer rule.

This search of the source is the early warning; the rule is also held at run time, where
no spelling evades it: in every test session the transports refuse a PATCH that product
code sends other than through ``kube/patches.py`` (``tests/one_writer_support.py``;
``test_one_writer_guard.py`` plants the same five PATCHes as here and sees each refused)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "kube_nudge"
WRITER = SRC / "kube" / "patches.py"

#: Methods whose name says they send a PATCH, whatever their receiver.
PATCHING_METHODS = frozenset({"apply", "patch", "merge_patch"})
#: Calls of such a method that are no request, by file and callee as written: the
#: reconciler asks a strategy to ``apply`` a decision (it writes through ``patches.send``).
NOT_REQUESTS = frozenset({("controller/reconciler.py", "strategy.apply")})


def _is_patch(node: ast.expr) -> bool:
    """A string constant naming the PATCH method (HTTP clients upper-case the method)."""
    return isinstance(node, ast.Constant) and str(node.value).upper() == "PATCH"


def patch_calls(source: str, where: str = "") -> list[int]:
    """Lines of ``source`` (the module at ``where``, relative to ``src/kube_nudge``) that
    send a PATCH: a call given the method "PATCH" as an argument, by position or keyword,
    or through a name bound to it; or a call of a method named ``apply``, ``patch`` or
    ``merge_patch`` (other than ``NOT_REQUESTS``)."""
    tree = ast.parse(source)
    verbs = {
        target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None
        and _is_patch(node.value)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    }  # fmt: skip
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        given = [*node.args, *(keyword.value for keyword in node.keywords)]
        method = any(_is_patch(a) or (isinstance(a, ast.Name) and a.id in verbs) for a in given)
        named = (
            isinstance(node.func, ast.Attribute)
            and node.func.attr in PATCHING_METHODS
            and (where, ast.unparse(node.func)) not in NOT_REQUESTS
        )
        if method or named:
            found.append(node.lineno)
    return found


def test_only_the_writer_sends_a_patch() -> None:
    """The client is searched too: it sends what its callers ask, and has no PATCH of its
    own (its server-side ``apply`` had no caller, and is gone)."""
    product = [p for p in SRC.rglob("*.py") if "agent" not in p.relative_to(SRC).parts]
    senders = {
        where: lines
        for path in product
        if path != WRITER
        and (lines := patch_calls(path.read_text(), where := path.relative_to(SRC).as_posix()))
    }
    assert senders == {}
    assert patch_calls(WRITER.read_text(), "kube/patches.py")  # the search sees the writer


#: PATCHes planted in the product, one of each kind a search of ``"PATCH"`` as a positional
#: argument missed but the first, by where they are planted (relative to ``src/kube_nudge``).
PLANTED = {
    "positional": ("strategies/planted.py", """
async def nudge(client, path):
    await client.request("PATCH", path, body={"metadata": {}})
"""),
    "keyword": ("strategies/planted.py", """
async def nudge(client, path):
    await client.request(method="PATCH", path=path, body={"metadata": {}})
"""),
    "verb in a variable": ("strategies/planted.py", """
VERB = "PATCH"

async def nudge(client, path):
    await client.request(VERB, path, body={"metadata": {}})
"""),
    "server-side apply": ("controller/planted.py", """
async def nudge(client, path):
    await client.apply(path, {"metadata": {}}, field_manager="kube-nudge")
"""),
    "through the transport": ("kube/client.py", """
class KubeClient:
    async def nudge(self, path):
        await self.http.request("PATCH", path, None, b"{}", {})
"""),
}  # fmt: skip


@pytest.mark.parametrize("kind", list(PLANTED))
def test_the_search_sees_each_kind_of_planted_patch(kind: str) -> None:
    where, source = PLANTED[kind]
    assert patch_calls(source, where) == [source.count("\n", 0, source.index("await")) + 1]


def test_the_search_leaves_a_strategy_applying_a_decision() -> None:
    call = "async def f(strategy):\n    await strategy.apply(target, decision, assessment)\n"
    assert patch_calls(call, "controller/reconciler.py") == []
    assert patch_calls(call, "controller/elsewhere.py") == [2]


def merge_patches(path: Path) -> list[int]:
    """Lines of ``path`` defining a ``merge_patch`` or calling ``.merge_patch``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            name = node.name
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            name = node.func.attr
        else:
            continue
        if name == "merge_patch":
            found.append(node.lineno)
    return found


def test_no_product_module_defines_or_calls_merge_patch() -> None:
    """Not even the agent: it is the admin client's verb."""
    found = {
        str(path.relative_to(SRC)): lines
        for path in SRC.rglob("*.py")
        if (lines := merge_patches(path))
    }
    assert found == {}


def test_the_search_would_see_a_merge_patch_defined(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.py"
    elsewhere.write_text(
        "class C:\n"
        "    async def merge_patch(self, path, body):\n"
        "        return await self.client.merge_patch(path, body)\n"
    )
    assert merge_patches(elsewhere) == [2, 3]
