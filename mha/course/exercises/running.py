"""Running the student's code: every way it can go wrong becomes a verdict (:func:`call`)."""
from __future__ import annotations

import traceback

import torch

from .answers import plain
from .guard import shortcut_message, watch_shortcuts
from .snapshots import _changed, _parameter_names, _snapshot, _tensors_in
from .verdicts import (_PACKAGE_DIR, _TORCH_DIR, Mistake, NotDone, _safely, _students_frame, _where,
                       exception_text, is_stub, type_name)


def call(fn, *args, what: str = "你的函数", forbid=(), may_modify=(), shortcut_hint=None,
         may_return_none: bool = False, **kwargs):
    """Call the student's ``fn`` and turn everything that can go wrong into a verdict.

    * a stub (``None``, ``...``, ``raise NotImplementedError``, returning ``...``) -> :class:`NotDone`;
    * a crash (``sys.exit()`` and torch errors included) -> :class:`Mistake` quoting the exception and the line;
    * a :class:`Mistake` raised by a checker's own object that ``fn`` called (a stand-in block) -> that verdict;
    * a call to something in ``forbid`` (see :func:`watch_shortcuts`) -> :class:`Mistake` naming it;
    * a tensor argument (or a module's parameter) changed in place -> :class:`Mistake`, except the
      arguments whose position or keyword is in ``may_modify``;
    * returning ``None`` -> :class:`Mistake` ("did you forget ``return``?").

    Only ``KeyboardInterrupt`` gets through, so that the student can stop a function that hangs.
    """
    if is_stub(fn):
        raise NotDone()
    if not callable(fn):
        raise Mistake(f"{what} 应该是一个函数（callable），却收到了 {type_name(fn)}")
    snapshot = _snapshot(fn, args, kwargs, set(may_modify))
    crash = None
    with watch_shortcuts(forbid) as watch:
        try:
            out = fn(*args, **kwargs)
        except NotImplementedError as e:  # the stub's raise, or torch's "not implemented for 'Long'"
            out, crash = (NotImplemented, None) if _is_stub_raise(e) else (None, e)
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # the student's code crashed (or called sys.exit()): say where, not a traceback
            crash = e
    if watch.hits:
        raise Mistake(shortcut_message(watch.hits[0], shortcut_hint))
    if crash is not None:
        raise Mistake(_crash_message(crash, what, fn, args)) from None
    if out is NotImplemented or out is Ellipsis:
        raise NotDone()
    if isinstance(out, torch.Tensor):
        out = plain(out)
    if isinstance(out, torch.nn.Module) and not _module_initialised(out):
        raise Mistake(f"{what} 得到的 {type_name(out)} 对象没有初始化：它的 __init__ 要先调用 super().__init__()，"
                      "nn.Module 才能正常工作")
    changed = _changed(snapshot)
    if changed is not None:
        path, how = changed
        if how == "replaced":
            raise Mistake(f"{what} 修改了输入：把传进来的{path} 换成了别的对象（而且没有换回来）；不要改动传进来的层，"
                          "需要别的权重时自己算，或者先 copy.deepcopy 一份层再改")
        if how == "restored":
            raise Mistake(f"{what} 修改了输入：原地改动了传进来的{path}，之后又改了回来；数值虽然还原了，"
                          "但返回值的计算图记着那次改动，求梯度时就会出错。不要原地改动输入和层的参数：需要改权重时，"
                          "用改过的副本自己算（例如 W = layer.W_o.weight.clone()），或者先 copy.deepcopy 一份层")
        raise Mistake(f"{what} 修改了输入：原地改动了传进来的{path}（例如 x[...] = ...、+=、masked_fill_ 或 x2 = x 之后再改 x2）；"
                      "不要改动输入，需要时先用 .clone() 复制一份")
    if out is None and not isinstance(fn, type) and not may_return_none:
        raise Mistake(f"{what} 返回了 None：是不是忘了写 return？")
    return out


def _is_stub_raise(error: NotImplementedError) -> bool:
    """``raise NotImplementedError`` written by the student (a stub), not one torch raised for a dtype."""
    frames = traceback.extract_tb(error.__traceback__)
    return not frames or not frames[-1].filename.startswith((_TORCH_DIR, _PACKAGE_DIR))


def _module_initialised(module) -> bool:
    """``nn.Module.__init__`` ran on it (it sets ``_modules``, which repr, parameters() and calls need)."""
    return "_modules" in _safely(lambda m: object.__getattribute__(m, "__dict__"), module, {})


def _crash_message(crash: BaseException, what: str, fn, args) -> str:
    """What a verdict says about an exception the student's function raised."""
    if isinstance(crash, SystemExit):
        return f"{what} 调用了 sys.exit()（或 exit()、quit()），检查没法继续；去掉它，用 return 返回结果"
    frames = traceback.extract_tb(crash.__traceback__)
    if isinstance(crash, Mistake):  # raised by a checker's own object that the student's code called: a verdict
        return f"{what}：{crash}{_where(_students_frame(frames))}"
    if isinstance(crash, TypeError) and len(frames) == 1:  # the call itself failed: wrong arguments
        return (f"{what} 的参数和题目给的不一样（{exception_text(crash)}）：检查参数的个数和顺序，"
                f"检查函数会这样调用它：{len(args)} 个位置参数")
    hint = ""
    if isinstance(crash, RuntimeError) and "leaf Variable that requires grad" in str(crash):
        inputs = [path for label, a in zip(_parameter_names(fn, len(args)), args) for path, t in _tensors_in(a, label)
                  if t.is_leaf and t.requires_grad and not isinstance(t, torch.nn.Parameter)]
        if not inputs:
            hint = ("。提示：原地改了一个需要梯度的张量。如果你要改写的是一个 Parameter（例如 layer.weight.copy_(...)），"
                    "把这几行放进 with torch.no_grad(): 里；如果它是输入，先 .clone() 一份再改")
        else:
            which = inputs[0] + "（它需要梯度）" if len(inputs) == 1 else "、".join(inputs) + " 中的一个（它们都需要梯度）"
            hint = f"。提示：原地改了传进来的{which}：不要改动输入，先 .clone() 一份再改，或者不用原地操作"
    return f"{what} 运行时抛出了 {exception_text(crash)}{_where(_students_frame(frames))}{hint}"
