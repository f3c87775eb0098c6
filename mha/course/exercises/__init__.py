"""Exercise checkers: one public ``check_*`` function per exercise.

Each checker takes what the student wrote (a function, a tensor, a class or a
number), prints one verdict in Chinese, returns True/False and never raises. The answer keys are computed by
the checker from the course package (never typed in, never by the student's code); the student's code runs under
``running.call``, which refuses the shortcuts each prompt rules out.
``summary("ch04")`` shows which of a chapter's exercises pass.
"""
from . import ch01, ch02, ch03, ch04, ch05, ch06, ch07, ch08, ch09, ch10, ch11, ch12, ch13
from .verdicts import results, summary
from .ch01 import *  # noqa: F401,F403
from .ch02 import *  # noqa: F401,F403
from .ch03 import *  # noqa: F401,F403
from .ch04 import *  # noqa: F401,F403
from .ch05 import *  # noqa: F401,F403
from .ch06 import *  # noqa: F401,F403
from .ch07 import *  # noqa: F401,F403
from .ch08 import *  # noqa: F401,F403
from .ch09 import *  # noqa: F401,F403
from .ch10 import *  # noqa: F401,F403
from .ch11 import *  # noqa: F401,F403
from .ch12 import *  # noqa: F401,F403
from .ch13 import *  # noqa: F401,F403

_CHAPTERS = (ch01, ch02, ch03, ch04, ch05, ch06, ch07, ch08, ch09, ch10, ch11, ch12, ch13)

__all__ = ["summary", "results"] + [name for module in _CHAPTERS for name in module.__all__]
