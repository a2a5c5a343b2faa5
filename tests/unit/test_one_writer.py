"""One module sends kube-nudge's PATCH requests (``kube/patches.py``): every other module
describes its change as a ``Patch`` and hands it there, so the field manager, the patch
type and the preconditions in its body are set in one place. ``KubeClient.merge_patch``
stays for the tests, the bench and the dev tools, which use the product's client as their
admin client; the product never calls it. The reload agent, a separate standard-library
process that writes only its own pod, is outside this rule."""

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


def test_the_search_would_see_a_patch_sent_elsewhere(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.py"
    elsewhere.write_text(
        "async def f(client):\n"
        "    await client.request('PATCH', '/x', body={})\n"
        "    await client.merge_patch('/y', {})\n"
    )
    assert patch_calls(elsewhere) == [2, 3]
