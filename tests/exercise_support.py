"""Helpers shared by the checker tests (tests/test_exercises_ch*.py)."""

# What a checker prints when it has a bug of its own; no answer a student can hand in may reach it.
INTERNAL_ERROR = "检查时出错"


def verdict(capsys, checker, answer):
    """Run a checker without recording it; assert it printed exactly one line; return (ok, line)."""
    ok = checker(answer, record=False)
    out = capsys.readouterr().out
    assert out.count("\n") == 1, f"expected exactly one verdict line, got {out!r}"
    assert INTERNAL_ERROR not in out, f"the checker's own error branch was reached: {out!r}"
    return ok, out


def raise_not_implemented(*args):
    raise NotImplementedError


def raise_value_error(*args):
    raise ValueError("boom")


def return_ellipsis(*args):
    return ...


# What an untouched stub cell hands to a checker.
STUBS = [None, ..., raise_not_implemented, return_ellipsis]
