"""Remove stored ipywidgets state from notebooks (``metadata.widgets``).

nbconvert stores the state of every live widget; on the website that state is
useless (no kernel runs there) and pulls in a widget manager from a CDN. The
live explorer cells are tagged ``remove-output``; their static twin cells carry
the picture. Run after executing: ``python tools/strip_widget_state.py book/*.ipynb``.

Why not nbclient's own ``store_widget_state=False``: with nbclient 0.11.0 (pinned) it
crashes on any notebook that displays an ``ipywidgets.Output`` (``KeyError`` in
``nbclient/output_widget.py``, which still writes into the state it was told not to keep);
chapters 5, 8, 9 and 10 do.
"""
from __future__ import annotations

import json
import pathlib
import sys


def strip(path: pathlib.Path) -> bool:
    nb = json.loads(path.read_text(encoding="utf-8"))
    if "widgets" not in nb.get("metadata", {}):
        return False
    del nb["metadata"]["widgets"]
    path.write_text(json.dumps(nb, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return True


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        if strip(pathlib.Path(arg)):
            print("stripped widget state:", arg)
