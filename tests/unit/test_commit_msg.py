"""tools/githooks/commit-msg: the subject line stays within 72 characters (CONTRIBUTING.md)."""
import subprocess
import sys
from pathlib import Path

import pytest

HOOK = Path(__file__).resolve().parents[2] / "tools" / "githooks" / "commit-msg"


@pytest.mark.parametrize("message, ok", [
    ("Ch 8: a short subject\n\nA body line that is much longer than seventy-two characters is fine here.\n", True),
    ("x" * 72 + "\n", True),
    ("x" * 73 + "\n", False),
    ("# a comment git strips\n" + "中" * 72 + "\n", True),   # characters, not bytes
    ("中" * 73 + "\n", False),
    ("\n\n" + "y" * 80 + "\n", False),   # leading blank lines are not the subject
])
def test_commit_msg_hook(tmp_path, message, ok):
    path = tmp_path / "COMMIT_EDITMSG"
    path.write_text(message, encoding="utf-8")
    result = subprocess.run([sys.executable, str(HOOK), str(path)], capture_output=True, text=True,
                            env={"LC_ALL": "C"})
    assert (result.returncode == 0) == ok, result.stderr
    if not ok:
        assert "72" in result.stderr
