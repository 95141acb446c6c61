"""``torchprof demo [MODEL]``: one training step of any torchvision model, with random weights and
random data of the shape its family expects (the command line runs it under the Profiler)."""

from __future__ import annotations

import argparse
import difflib
from typing import Any

from ._options import add_options

DEMO = "demo"
DEFAULT_MODEL = "resnet18"


def build_demo_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torchprof demo",
        description="Profile one training step (forward, backward, SGD step, after one warm-up step) of a "
                    "torchvision model with random weights and print the layer tree.",
    )  # fmt: skip
    parser.add_argument("model", nargs="?", default=DEFAULT_MODEL, help=f"a torchvision model name (default {DEFAULT_MODEL})")
    # The view options may repeat after the model name; without defaults, they keep earlier values.
    add_options(parser, "demo", suppress=frozenset({"cli"}))
    return parser


class TorchvisionMismatch(ImportError):
    """torchvision is installed but was built for another torch (it fails as it imports)."""


def model_names() -> list[str]:
    """The torchvision model names; ImportError without torchvision, :class:`TorchvisionMismatch`
    (saying which versions, and the fix) with a torchvision built for another torch."""
    try:
        from torchvision import models
    except RuntimeError as exc:  # "operator torchvision::nms does not exist": its kernels did not load
        raise TorchvisionMismatch(torchvision_mismatch()) from exc
    return list(models.list_models())


def torchvision_mismatch() -> str:
    """What to say when torchvision fails to import beside this torch: the two versions and the
    torchvision that goes with the torch (torchvision 0.N+15 for torch 2.N)."""
    import re
    from importlib.metadata import PackageNotFoundError, version

    import torch

    try:
        vision = version("torchvision")
    except PackageNotFoundError:
        vision = "?"
    match = re.match(r"2\.(\d+)", torch.__version__)
    wanted = f"torchvision==0.{int(match.group(1)) + 15}.*" if match else "the torchvision built for it"
    return (f"torchvision {vision} was built for another torch than the {torch.__version__} installed (its operators do not "
            f"load): pip install '{wanted}' from the same index as torch (pytorch.org lists the pairs)")


def unknown_model(name: str, names: list[str]) -> str | None:
    """Why ``name`` is no model of ``names`` (with the closest names), or None when it is one."""
    if name in names:
        return None
    close = difflib.get_close_matches(name, names, n=5, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else "; torchprof demo --list shows them all"
    return f"torchvision has no model {name!r}{hint}"


def demo_step(name: str, *, batch: int = 8, size: int | None = None) -> tuple[Any, str]:
    """A closure running one training step of torchvision model ``name`` on random data, and a
    description of the input. Classification, segmentation, video, detection and optical-flow
    models each get the input their family expects."""
    import torch
    from torchvision import models

    family = models.get_model_builder(name).__module__.split(".")[2]  # torchvision.models.<family>...
    kwargs: dict[str, Any] = {"weights": None}
    if family in ("detection", "segmentation"):
        kwargs["weights_backbone"] = None  # the default would download ImageNet weights
    if name in ("googlenet", "inception_v3", "quantized_googlenet", "quantized_inception_v3"):
        kwargs["init_weights"] = False  # scipy-based truncated-normal init is slow and irrelevant here
    torch.manual_seed(0)
    model = models.get_model(name, **kwargs)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    inputs: tuple[Any, ...]
    if family == "video":
        s = size or (224 if name.startswith(("mvit", "swin3d", "s3d")) else 112)
        x = torch.randn(batch, 3, 16, s, s)
        inputs, shape = (x,), f"{batch}x3x16x{s}x{s}"
    elif family == "optical_flow":
        s = size or 128
        inputs, shape = (torch.randn(batch, 3, s, s), torch.randn(batch, 3, s, s)), f"2 x {batch}x3x{s}x{s}"
    elif family == "detection":
        s = size or 320
        images = [torch.rand(3, s, s) for _ in range(batch)]
        targets = [_detection_target(s) for _ in range(batch)]
        inputs, shape = (images, targets), f"{batch} images 3x{s}x{s} with one box each"
    else:
        s = size or (299 if "inception" in name else 224)
        inputs, shape = (torch.randn(batch, 3, s, s),), f"{batch}x3x{s}x{s}"

    def step() -> None:
        loss = scalar_loss(model(*inputs))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step, shape


def _detection_target(size: int) -> dict[str, Any]:
    import torch

    box = torch.tensor([[size * 0.2, size * 0.2, size * 0.7, size * 0.8]])
    masks = torch.zeros(1, size, size, dtype=torch.uint8)
    masks[0, size // 5 : size * 4 // 5, size // 5 : size * 7 // 10] = 1
    keypoints = torch.cat([torch.rand(1, 17, 2) * size * 0.5 + size * 0.2, torch.ones(1, 17, 1)], dim=2)
    return {"boxes": box, "labels": torch.tensor([1]), "masks": masks, "keypoints": keypoints}


def scalar_loss(output: Any) -> Any:
    """One number to call backward on, from whatever a model returns (a tensor, a dict of
    losses or outputs, a tuple with auxiliary logits, a list of flow refinements)."""
    import torch

    total = None
    stack = [output]
    while stack:
        item = stack.pop()
        if isinstance(item, torch.Tensor):
            if item.requires_grad and item.is_floating_point():
                total = item.float().mean() if total is None else total + item.float().mean()
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    if total is None:
        raise RuntimeError("the model returned no tensor that needs a gradient")
    return total
