"""The replay's shape-only meta kernels (``_capture/fast_meta.py``): outputs exactly as torch's
own meta kernels make them, and no events of their own in the replay's profile."""

from __future__ import annotations

import torch
from torch import nn

import torchprof
from torchprof._capture.fast_meta import fast_meta_kernels


def _outputs(cases: list) -> list:
    out = []
    for fn in cases:
        try:
            y = fn()
            out.append((tuple(y.shape), y.stride(), y.dtype, y.device.type))
        except Exception as exc:  # an error must be torch's own, the same one
            out.append(type(exc).__name__)
    return out


def _meta(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.empty(shape, device="meta", dtype=dtype)


def test_reductions_make_what_torch_makes() -> None:
    cases = []
    for shape in [(2,), (4, 3), (2, 3, 5), (1, 4, 1), (0, 3), ()]:
        for dim in [None, [], [0], [-1], [0, -1], [1], [0, 0], [5]]:
            for keep in (False, True):
                for op in (torch.sum, torch.mean):
                    cases.append(lambda s=shape, d=dim, k=keep, f=op: f(_meta(*s), d, keepdim=k))
            cases.append(lambda s=shape: torch.sum(_meta(*s)))
    cases += [
        lambda: torch.sum(_meta(2, 3, dtype=torch.float16), [1], dtype=torch.float32),
        lambda: torch.sum(_meta(2, 3, dtype=torch.int64), [1]),
        lambda: torch.mean(_meta(2, 3, dtype=torch.int64), [1]),
        lambda: torch.sum(_meta(4, 6).t(), [0], keepdim=True),
        lambda: torch.sum(_meta(2, 3, 4).permute(2, 0, 1), [1]),
        lambda: _meta(3, 1) * _meta(1, 4),
        lambda: _meta(3, 4).t() + _meta(4, 3),
        lambda: _meta(2, 3) > 0,
    ]
    cases = cases + cases[::-1]  # the second time, from sizes worked out once
    theirs = _outputs(cases)
    with fast_meta_kernels():
        ours = _outputs(cases)
    assert ours == theirs


def test_elementwise_ops_make_what_torch_makes_each_time() -> None:
    """Sizes each stand-in worked out once are reused: each case runs twice, in another order
    the second time, and every output is the one torch's own kernel makes."""
    cl = torch.channels_last
    cases = [
        lambda: _meta(2) * _meta(1),
        lambda: _meta(1) * _meta(2),
        lambda: _meta(2, 3) * _meta(2, 3),
        lambda: _meta(4, 1, 3) + _meta(3),
        lambda: _meta(3) + _meta(4, 1, 3),
        lambda: _meta(3, 1) - _meta(1, 4),
        lambda: _meta(3, 4) / _meta(5, 4),
        lambda: torch.addcmul(_meta(4, 1), _meta(1, 5), _meta(4, 5)),
        lambda: torch.addcmul(_meta(4, 5), _meta(4, 1), _meta(5)),
        lambda: _meta() * _meta(2, 3),
        lambda: _meta(2, 3) * 2.5,
        lambda: _meta(2, 3, dtype=torch.float16) * _meta(2, 3),
        lambda: _meta(2, 3, dtype=torch.int64) * _meta(2, 3, dtype=torch.int64),
        lambda: _meta(2, 3, 4, 5).to(memory_format=cl) * _meta(2, 3, 4, 5).to(memory_format=cl),
        lambda: _meta(2, 3, 4, 5).to(memory_format=cl) * _meta(2, 3, 4, 5),
        lambda: _meta(2, 3, 4, 5).to(memory_format=cl) * _meta(3, 1, 1),
        lambda: _meta(4, 3).t() * _meta(3, 4),
        lambda: _meta(3, 1) > _meta(1, 4),
        lambda: _meta(2, 3) <= 0,
        lambda: torch.sigmoid(_meta(5, 2)),
    ]
    cases = cases + cases[::-1]
    theirs = _outputs(cases)
    with fast_meta_kernels():
        ours = _outputs(cases)
    assert ours == theirs


def test_stand_ins_record_no_events_inside_the_op() -> None:
    """The op is recorded (its FLOPs are counted from it); how the stand-in makes its output is
    not: the real device has no such events inside the op."""
    x, w = _meta(8, 4), _meta(4)
    with fast_meta_kernels(), torch.profiler.profile(record_shapes=True) as prof:
        (x * w).sum([0]).mean([0], keepdim=True).relu()
    events = prof.profiler.function_events
    ops = ["aten::mul", "aten::sum", "aten::mean", "aten::relu"]
    assert [e.name for e in events if e.cpu_parent is None] == ops
    assert [(e.name, e.input_shapes[0]) for e in events] == list(zip(ops, [[8, 4], [8, 4], [4], [1]]))


def test_a_broadcast_parameter_counts_as_with_shapes() -> None:
    """A parameter broadcast over the batch: its gradient is summed back (``aten::sum`` in the
    backward, a stand-in in the replay); every row's FLOPs equal the recorded shapes' count."""

    class Scale(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(6, 5)
            self.scale = nn.Parameter(torch.ones(5))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return (self.lin(x) * self.scale).mean(dim=1, keepdim=True)

    model = nn.Sequential(Scale(), nn.ReLU(), Scale().lin)
    model[2] = nn.Linear(1, 3)
    x = torch.randn(4, 6)
    tables = []
    for shapes in (False, True):
        model.zero_grad(set_to_none=True)
        with torchprof.Profiler(shapes=shapes) as prof:
            model(x).sum().backward()
        df = prof.df
        tables.append(dict(zip(df.index, df["flops"])))
    assert tables[0] == tables[1]
    assert tables[0]["profile"] > 0 and len(tables[0]) > 20


def test_reshape_and_flatten_of_meta_tensors_make_what_the_cpu_makes_in_a_replay():
    """Sizes, strides and the backward node of each reshape: the CPU's (a ``_reshape_alias`` for a
    tensor not contiguous but viewable), where torch's own meta composite makes a ``view``."""
    from torchprof._capture.fast_meta import reshape_as_on_device

    def made(device: str, size, stride, how):
        x = torch.empty_strided(size, stride, device=device).requires_grad_(True)
        try:
            y = how(x)
        except (RuntimeError, IndexError) as exc:  # the same error on both
            return type(exc).__name__
        return tuple(y.shape), y.stride(), type(y.grad_fn).__name__

    layouts = [((4, 2, 8), (16, 8, 1)), ((4, 2, 8), (1, 32, 4)), ((2, 4, 8), (8, 16, 1)), ((3, 1, 4), (1, 12, 3)),
               ((2, 3), (1, 2)), ((0, 3, 2), (6, 1, 3)), ((6,), (2,)), ((2, 2, 3, 4), (48, 12, 1, 3))]  # fmt: skip
    hows = [lambda x: x.reshape(-1), lambda x: x.reshape(x.shape[0], -1), lambda x: x.reshape(*x.shape[:-1], 1, x.shape[-1]),
            lambda x: x.reshape(-1, 2), lambda x: x.reshape(-1, -1), lambda x: x.flatten(), lambda x: x.flatten(1),
            lambda x: x.flatten(0, -2), lambda x: x.flatten(-1, 0), lambda x: x.reshape_as(torch.empty(x.numel()))]  # fmt: skip
    cases = [(s, st, h) for s, st in layouts for h in hows]
    cpu = [made("cpu", *case) for case in cases]
    assert any(isinstance(c, tuple) and c[2] == "ReshapeAliasBackward0" for c in cpu)  # the case that differed
    with reshape_as_on_device():
        meta = [made("meta", *case) for case in cases]
    assert meta == cpu
