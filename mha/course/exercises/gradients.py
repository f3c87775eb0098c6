"""Gradient checks: the answer must stay differentiable, gradients must reach the inputs."""
from __future__ import annotations

import torch

from .verdicts import Mistake


def expect_gradients(output: torch.Tensor, wrt: dict, what: str) -> None:
    """The answer must be differentiable: gradients reach every tensor in ``wrt`` (name -> tensor)."""
    if not output.requires_grad:
        raise Mistake(f"{what} 不能求梯度（requires_grad=False）：是不是在 torch.no_grad() 里算的，"
                      "或者用了 .detach() / .item() / numpy？这样的层没法训练")
    names = list(wrt)
    grads = torch.autograd.grad(output.sum(), [wrt[n] for n in names], allow_unused=True, retain_graph=True)
    for name, grad in zip(names, grads):
        if grad is None:
            raise Mistake(f"梯度传不到 {name}：{what} 的计算和 {name} 断开了（.detach()、no_grad 或重新建的张量？）")
        if not torch.isfinite(grad).all():
            raise Mistake(f"{name} 的梯度里有 NaN 或 inf：检查掩码和 softmax（被屏蔽的位置用很小的有限数，或者事后把 NaN 清掉）")
