"""Mutation snapshots: the tensors of the arguments before the student's code runs, to name an input changed in place."""
from __future__ import annotations

import inspect

import torch


def _tensors_in(obj, path: str):
    """Yield (path, tensor) for every tensor in an argument: tensors, lists/tuples/dicts of them, modules."""
    if isinstance(obj, torch.Tensor):
        yield path, obj
    elif isinstance(obj, (list, tuple)):
        for i, item in enumerate(obj):
            yield from _tensors_in(item, f"{path}[{i}]")
    elif isinstance(obj, dict):
        for key, item in obj.items():
            yield from _tensors_in(item, f"{path}[{key!r}]")
    elif isinstance(obj, torch.nn.Module):
        for name, tensor in obj.state_dict(keep_vars=True).items():
            yield f"{path}.{name}", tensor


def _parameter_names(fn, n: int) -> list:
    """Names of the first ``n`` positional parameters of ``fn`` (for messages), or ordinals."""
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except Exception:  # a builtin without a signature, or a student's callable with a broken __signature__
        params = []
    return [f"参数 {params[i]}" if i < len(params) else f"第 {i + 1} 个参数" for i in range(n)]


def _snapshot(fn, args, kwargs, may_modify):
    labels = _parameter_names(fn, len(args))
    named = [(labels[i], a) for i, a in enumerate(args) if i not in may_modify]
    named += [(f"参数 {k}", a) for k, a in kwargs.items() if k not in may_modify]
    tensors = [(path, t, t.detach().clone(), t._version) for label, a in named for path, t in _tensors_in(a, label)]
    modules = [(label, a, dict(a.state_dict(keep_vars=True))) for label, a in named if isinstance(a, torch.nn.Module)]
    return tensors, modules


def _changed(snapshot) -> tuple[str, str] | None:
    """The first argument changed in place, as ``(path, how)``: ``how`` is "values" (they differ now), "restored"
    (a tensor that needs gradients written to, then set back: autograd still sees the write) or "replaced" (a module's parameter or submodule
    swapped for another object)."""
    tensors, modules = snapshot
    for path, tensor, before, _ in tensors:
        now = tensor.detach()
        if now.shape != before.shape or now.dtype != before.dtype or not torch.equal(now, before):
            return path, "values"
    for label, module, state in modules:
        now = module.state_dict(keep_vars=True)
        for name, tensor in state.items():
            if now.get(name) is not tensor:
                return f"{label}.{name}", "replaced"
    for path, tensor, _, version in tensors:
        if tensor._version != version and tensor.requires_grad:  # harmless for a tensor autograd does not track
            return path, "restored"
    return None
