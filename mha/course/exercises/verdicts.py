"""What a checker says: the verdict types, the one printed line, the chapter summary.

A checker is written as a plain function that *raises* :class:`Mistake` with a specific Chinese message
when the answer is wrong and returns normally when it is right. :func:`checker` wraps it so that the public
``check_*`` function prints exactly one verdict (passed / not done yet / what is wrong), returns a
:class:`Verdict`, never raises, and records the result for :func:`summary`. A verdict quotes the student's
values short and safely (:func:`describe`).
"""
from __future__ import annotations

import functools
import os
import reprlib
import site
import sysconfig
import traceback
from collections import OrderedDict

import torch


PASS = "✅ 通过"
FAIL = "❌ 未通过"
TODO = "⏳ 还没完成"

# chapter -> OrderedDict(exercise id -> (title, status or None))
_REGISTRY: "OrderedDict[str, OrderedDict[str, list]]" = OrderedDict()


class Verdict:
    """What a checker returns: ``bool(verdict)`` is whether the answer passed, and it equals that bool.

    A notebook cell that ends with the checker's call displays nothing for it (``_ipython_display_``):
    the one printed line already says passed / not done / what is wrong."""

    __slots__ = ("passed",)

    def __init__(self, passed: bool):
        self.passed = bool(passed)

    def __bool__(self) -> bool:
        return self.passed

    def __eq__(self, other):
        return self.passed == bool(other) if isinstance(other, (bool, Verdict)) else NotImplemented

    def __hash__(self):
        return hash(self.passed)

    def __repr__(self) -> str:
        return f"Verdict(passed={self.passed})"

    def _ipython_display_(self) -> None:
        """Show nothing: the verdict was printed."""


class Mistake(Exception):
    """Raised inside a checker: the answer is wrong; the message says how and hints at why."""


class NotDone(Exception):
    """Raised inside a checker: the answer is still the stub."""


def is_stub(obj) -> bool:
    """True for the placeholders a stub cell leaves: ``None`` and ``...``."""
    return obj is None or obj is Ellipsis


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # .../mha
_CHECKER_DIR = os.path.dirname(os.path.abspath(__file__))  # .../mha/course/exercises
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))
# Where code that is neither the student's nor the course's lives: the standard library and site-packages.
_LIBRARY_DIRS = tuple({os.path.abspath(p) + os.sep
                       for p in [*(sysconfig.get_paths()[k] for k in ("stdlib", "purelib", "platlib")), *site.getsitepackages()]})


def _where(frame) -> str:
    """``（第 N 行：code）`` for a traceback frame, or nothing when its line is unknown."""
    return f"（第 {frame.lineno} 行：{frame.line}）" if frame is not None and frame.line else ""


def _students_frame(frames):
    """The deepest traceback frame in the student's own code (not in the checkers or in torch)."""
    for frame in reversed(frames):
        if not frame.filename.startswith((_CHECKER_DIR, _TORCH_DIR)):
            return frame
    return None


def _raised_by_student(error: BaseException) -> bool:
    """The exception was raised in the student's own code (a ``__repr__``, ``__eq__``, ``__len__`` of an
    answer the checker looked at), not in the course package, torch or a library."""
    frames = traceback.extract_tb(error.__traceback__)
    return bool(frames) and not frames[-1].filename.startswith((_PACKAGE_DIR, _TORCH_DIR) + _LIBRARY_DIRS)


# A verdict quotes what came back; that must work for every value, also one whose __repr__ or
# __str__ raises, a module built without super().__init__(), a huge list: shown short, never raising.
_SHORT = reprlib.Repr()
_SHORT.maxstring, _SHORT.maxother, _SHORT.maxlist, _SHORT.maxtuple, _SHORT.maxdict = 60, 80, 8, 8, 6


def _safely(show, value, fallback):
    try:
        return show(value)
    except KeyboardInterrupt:
        raise
    except BaseException:  # the value's own __repr__/__str__ broke (even with sys.exit()): say so instead
        return fallback


def type_name(value) -> str:
    """The name of the value's type."""
    return _safely(lambda v: type(v).__name__, value, "?")


def short_repr(value) -> str:
    """``repr(value)``, cut short; ``<T 对象>`` when the value cannot show itself."""
    return _safely(_SHORT.repr, value, f"<{type_name(value)} 对象>")


def describe(value) -> str:
    """``type：repr`` of a student's value, for "expected X, got ..." verdicts."""
    return f"{type_name(value)}：{short_repr(value)}"


def exception_text(error: BaseException) -> str:
    """``Name: message`` of an exception, also when its __str__ raises."""
    message = _safely(str, error, "（异常信息无法显示）")
    if len(message) > 300:
        message = message[:297] + "..."
    return f"{type_name(error)}: {message}" if message else type_name(error)


def checker(chapter: str, exercise_id: str, title: str):
    """Decorate ``fn(answer) -> None`` (raising :class:`Mistake`/:class:`NotDone`) into a safe checker.

    The returned function takes the student's answer (a stub, ``None`` or ``...``, is not done yet) and ``record=True``
    (reference-solution cells pass ``record=False`` so the summary shows only the student's own attempts)."""
    chapter_entries = _REGISTRY.setdefault(chapter, OrderedDict())
    chapter_entries[exercise_id] = [title, None]

    def wrap(fn):
        @functools.wraps(fn)
        def check(answer=None, *, record: bool = True) -> Verdict:
            status = "fail"
            try:
                with torch.random.fork_rng(), torch.enable_grad():  # a chapter may switch autograd off
                    torch.manual_seed(0)
                    if is_stub(answer):
                        raise NotDone()
                    fn(answer)
                status, line = "pass", f"{PASS}：{exercise_id} {title}"
            except NotDone:
                status, line = "todo", f"{TODO}：{exercise_id} {title} —— 把 `...` 或 `raise NotImplementedError` 换成你的代码，再运行这一格"
            except Mistake as m:
                line = f"{FAIL}：{exercise_id} {title} —— {m}"
            except KeyboardInterrupt:  # the student stopped the cell
                raise
            except BaseException as e:  # nothing may crash the student's notebook
                line = f"{FAIL}：{exercise_id} {title} —— {_unexpected(e)}"
            if record:
                chapter_entries[exercise_id][1] = status
            print(" ".join(line.splitlines()))  # one line, even when a message quotes a multi-line repr
            return Verdict(status == "pass")

        check.exercise_id = exercise_id
        check.chapter = chapter
        return check

    return wrap


def _unexpected(error: BaseException) -> str:
    """The verdict for an exception that escaped a check: raised by the student's own code when the
    checker looked at the answer (a ``__repr__``, ``__eq__`` or ``__len__`` of it), or a checker bug."""
    if isinstance(error, SystemExit):
        return "你的代码调用了 sys.exit()（或 exit()、quit()），检查没法继续；去掉它再运行"
    if _raised_by_student(error):
        where = _where(traceback.extract_tb(error.__traceback__)[-1])
        return f"检查你的答案时，你自己写的代码抛出了 {exception_text(error)}{where}"
    return f"检查时出错（{exception_text(error)}）"


def _number(exercise_id: str) -> tuple:
    return tuple(int(n) for n in exercise_id.split("."))


def results(chapter: str) -> dict:
    """``{exercise id: "pass" | "fail" | "todo" | None}`` for one chapter (None = not attempted), in exercise order;
    reference-solution cells call the checker with ``record=False`` and are not counted."""
    if chapter not in _REGISTRY:
        raise ValueError(f"unknown chapter {chapter!r}; known: {list(_REGISTRY)}")
    return {k: _REGISTRY[chapter][k][1] for k in sorted(_REGISTRY[chapter], key=_number)}


def summary(chapter: str) -> None:
    """Print which of a chapter's exercises pass (use :func:`results` for the data)."""
    res = results(chapter)
    marks = {"pass": PASS, "fail": FAIL, "todo": TODO, None: "· 未运行"}
    print(f"本章练习（{chapter}）：")
    for exercise_id, status in res.items():
        print(f"  {marks[status]}  {exercise_id} {_REGISTRY[chapter][exercise_id][0]}")
    n_pass = sum(1 for s in res.values() if s == "pass")
    print(f"通过 {n_pass} / {len(res)}")
