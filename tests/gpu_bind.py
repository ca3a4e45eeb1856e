"""What the GPU-against-CPU operator tests share: arrays on both devices, and a symbol
bound on a device and run forward and backward."""

from __future__ import annotations

import numpy as np
import rsmx as mx


def both(x: np.ndarray, dtype=None):
    """`x` as an array on the CPU and one on gpu(0)."""
    dtype = dtype or x.dtype
    return mx.nd.array(x, dtype=dtype), mx.nd.array(x, ctx=mx.gpu(0), dtype=dtype)


def bind_and_run(sym, args: dict, ctx, grad=(), heads=None, req="write", passes=1,
                 is_train=True, start=0.0):
    """Binds `sym` on `ctx` with `args` (name: numpy array) and gradients, starting at
    `start`, for the args named in `grad` under `req`; runs `passes` forward passes, each
    followed by a backward pass when there are gradients (head gradients `heads`, numpy
    arrays, or None for ones). Returns the executor."""
    shapes = {k: v.shape for k, v in args.items()}
    types = {k: v.dtype for k, v in args.items()}
    reqs = {k: (req if k in grad else "null") for k in args}
    ex = sym.simple_bind(ctx, grad_req=reqs, type_dict=types, **shapes)
    for k, v in args.items():
        ex.arg_dict[k][:] = v
    for k in grad:
        ex.grad_dict[k][:] = start
    for _ in range(passes):
        ex.forward(is_train=is_train)
        if grad:
            ex.backward(None if heads is None
                        else [mx.nd.array(h, ctx=ctx, dtype=h.dtype) for h in heads])
    return ex
