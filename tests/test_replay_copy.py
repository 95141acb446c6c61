"""The replay's data-free copy of a model (``replay.tensor_copy``): state is copied as
``copy.deepcopy`` would copy it (shared objects stay shared, nothing is the user's object), with
its plain values and empty containers taken without deepcopy's generic machinery."""

from __future__ import annotations

import torch
from torch import nn

from torchprof._capture.replay import _Tensors, modules_below, tensor_copy


class Keeper(nn.Module):
    def __init__(self, shared: set, log: list) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.size, self.name, self.scale, self.flag, self.nothing = 3, "k", 0.5, True, None
        self.shared, self.log, self.empty, self.table = shared, log, [], {}
        self.register_buffer("kept", torch.zeros(3), persistent=False)  # a name in _non_persistent_buffers_set


def test_the_copy_shares_what_the_model_shares_and_nothing_with_the_model() -> None:
    shared, log = set(), []
    model = nn.Sequential(Keeper(shared, log), Keeper(shared, log))
    copied = tensor_copy(model, _Tensors(fake=False), modules_below(model))
    a, b = copied[0], copied[1]
    assert (a.size, a.name, a.scale, a.flag, a.nothing) == (3, "k", 0.5, True, None)
    # One object in the model is one object in the copy, and not the user's.
    assert a.shared is b.shared and a.shared is not shared and a.shared == set()
    assert a.log is b.log and a.log is not log
    assert a.empty is not b.empty and a.empty is not model[0].empty and a.table is not model[0].table
    assert a._non_persistent_buffers_set == {"kept"} and a._non_persistent_buffers_set is not model[0]._non_persistent_buffers_set
    assert a.kept.is_meta and a.lin.weight.is_meta and isinstance(a.lin.weight, nn.Parameter)
    # What the copy's forward appends stays in the copy.
    a.log.append(1)
    a.empty.append(2)
    assert log == [] and model[0].empty == []
