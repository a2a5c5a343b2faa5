"""One module sends kube-nudge's PATCH requests (``kube/patches.py``): every other module
describes its change as a ``Patch`` and hands it there, so the field manager, the patch
type and the preconditions in its body are set in one place. The product has no
``merge_patch`` at all: the tests, the bench and the demo merge-patch through the dev
tools' admin client (``kube_nudge_dev.admin.AdminClient``, the product's ``KubeClient``
plus ``delete`` and ``merge_patch``). The reload agent, a separate standard-library
process that writes only its own pod, is outside the one-writer rule."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "kube_nudge"
WRITER = SRC / "kube" / "patches.py"
CLIENT = SRC / "kube" / "client.py"


def patch_calls(path: Path) -> list[int]:
    """Lines of ``path`` calling something with the method "PATCH", or ``.merge_patch``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        method = [a for a in node.args if isinstance(a, ast.Constant) and a.value == "PATCH"]
        named = isinstance(node.func, ast.Attribute) and node.func.attr == "merge_patch"
        if method or named:
            found.append(node.lineno)
    return found


def test_only_the_writer_sends_a_patch() -> None:
    product = [p for p in SRC.rglob("*.py") if "agent" not in p.relative_to(SRC).parts]
    senders = {
        str(path.relative_to(SRC)): lines
        for path in product
        if path not in (WRITER, CLIENT) and (lines := patch_calls(path))
    }
    assert senders == {}
    assert patch_calls(WRITER)  # the writer itself is seen by the search


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
    """Not even the client (which ``test_only_the_writer_sends_a_patch`` leaves out: its
    ``request`` and ``apply`` send PATCH) nor the agent: it is the admin client's verb."""
    found = {
        str(path.relative_to(SRC)): lines
        for path in SRC.rglob("*.py")
        if (lines := merge_patches(path))
    }
    assert found == {}


def test_the_searches_would_see_a_patch_sent_or_a_merge_patch_defined(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.py"
    elsewhere.write_text(
        "class C:\n"
        "    async def merge_patch(self, path, body):\n"
        "        await self.client.request('PATCH', '/x', body={})\n"
        "        return await self.client.merge_patch(path, body)\n"
    )
    assert patch_calls(elsewhere) == [3, 4]
    assert merge_patches(elsewhere) == [2, 4]
