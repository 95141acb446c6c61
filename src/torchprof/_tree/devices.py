"""Peak dense FLOP/s of current accelerators, per data type, and which device a profile ran on.

Model FLOPs utilisation (MFU) compares the FLOP/s a run achieved with what the device can do at
most. The figures below are the vendors' own, for dense math (no structured sparsity, which the
datasheets list at twice these), at boost clock, per GPU (per package for AMD's MI250X, which
PyTorch shows as two devices of half each: see ``_PER_DEVICE``).

Sources (each figure is from its line's datasheet):

- NVIDIA A100: "NVIDIA A100 Tensor Core GPU" datasheet (nvidia.com, 2021, SXM and PCIe alike):
  FP64 9.7, FP64 Tensor Core 19.5, FP32 19.5, TF32 156, BF16/FP16 312 TFLOPS.
- NVIDIA H100: "NVIDIA H100 Tensor Core GPU" datasheet (nvidia.com, 2023), halving the
  with-sparsity figures: SXM FP64 34, FP32 67, TF32 494.5, BF16/FP16 989.5, FP8 1979; PCIe FP64 26,
  FP32 51, TF32 378, BF16/FP16 756, FP8 1513; NVL FP64 30, FP32 60, TF32 417.5, BF16/FP16 835.5,
  FP8 1670.5 TFLOPS.
- NVIDIA H200: "NVIDIA H200 Tensor Core GPU" datasheet (nvidia.com, 2024): SXM as H100 SXM (FP64 34,
  FP32 67, TF32 494.5, BF16/FP16 989.5, FP8 1979), NVL as H100 NVL (FP32 60, BF16/FP16 835.5, FP8
  1670.5) TFLOPS, dense.
- NVIDIA B200: "NVIDIA HGX B200" / DGX B200 datasheets (nvidia.com, 2024), per GPU of eight, dense:
  FP64 37, FP32 75, TF32 1100, BF16/FP16 2250, FP8 4500 TFLOPS.
- NVIDIA L4: "NVIDIA L4 Tensor Core GPU" datasheet (nvidia.com, 2023), halving the with-sparsity
  figures: FP32 30.3, TF32 60, BF16/FP16 121, FP8 242.5 TFLOPS.
- NVIDIA L40S: "NVIDIA L40S GPU" datasheet (nvidia.com, 2023): FP32 91.6, TF32 183, BF16/FP16 362.05,
  FP8 733 TFLOPS (dense).
- AMD Instinct MI250X: "AMD Instinct MI250X Accelerator" data sheet (amd.com, 2021), per OAM
  package of two GCDs: FP64 matrix 95.7, FP32 matrix 95.7, FP16/BF16 383 TFLOPS (no sparsity).
- AMD Instinct MI300X: "AMD Instinct MI300X Accelerator" data sheet (amd.com, 2023), dense:
  FP64 matrix 163.4, FP32 163.4, TF32 653.7, BF16/FP16 1307.4, FP8 2614.9 TFLOPS.

``fp32`` is what float32 math runs at without TF32 (torch's default for matmuls,
``torch.get_float32_matmul_precision() == "highest"``); ``tf32`` where the run allowed it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

T = 1e12
#: The data types the table knows, as :func:`dtype_name` spells them.
DTYPES: tuple[str, ...] = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8")


@dataclass(frozen=True)
class Device:
    """One accelerator model and its peak dense FLOP/s per data type."""

    name: str
    """How torchprof names it (``NVIDIA H100 SXM``)."""
    pattern: str
    """A regular expression (``re.search``, case-insensitive) over the device's reported name."""
    peaks: dict[str, float]
    """Peak dense FLOP/s by data type (:data:`DTYPES`)."""


# Most specific names first: "H100 PCIe" before "H100", "L40S" before "L4".
DEVICES: tuple[Device, ...] = (
    Device("NVIDIA H100 PCIe", r"H100.*PCIe", {"fp64": 26 * T, "fp32": 51 * T, "tf32": 378 * T, "bf16": 756 * T, "fp16": 756 * T, "fp8": 1513 * T}),
    Device("NVIDIA H100 NVL", r"H100.*NVL", {"fp64": 30 * T, "fp32": 60 * T, "tf32": 417.5 * T, "bf16": 835.5 * T, "fp16": 835.5 * T, "fp8": 1670.5 * T}),
    Device("NVIDIA H100 SXM", r"H100", {"fp64": 34 * T, "fp32": 67 * T, "tf32": 494.5 * T, "bf16": 989.5 * T, "fp16": 989.5 * T, "fp8": 1979 * T}),
    Device("NVIDIA H200 NVL", r"H200.*NVL", {"fp64": 30 * T, "fp32": 60 * T, "tf32": 417.5 * T, "bf16": 835.5 * T, "fp16": 835.5 * T, "fp8": 1670.5 * T}),
    Device("NVIDIA H200 SXM", r"H200", {"fp64": 34 * T, "fp32": 67 * T, "tf32": 494.5 * T, "bf16": 989.5 * T, "fp16": 989.5 * T, "fp8": 1979 * T}),
    Device("NVIDIA B200", r"B200", {"fp64": 37 * T, "fp32": 75 * T, "tf32": 1100 * T, "bf16": 2250 * T, "fp16": 2250 * T, "fp8": 4500 * T}),
    Device("NVIDIA A100", r"A100", {"fp64": 19.5 * T, "fp32": 19.5 * T, "tf32": 156 * T, "bf16": 312 * T, "fp16": 312 * T}),
    Device("NVIDIA L40S", r"L40S", {"fp32": 91.6 * T, "tf32": 183 * T, "bf16": 362.05 * T, "fp16": 362.05 * T, "fp8": 733 * T}),
    Device("NVIDIA L4", r"\bL4\b", {"fp32": 30.3 * T, "tf32": 60 * T, "bf16": 121 * T, "fp16": 121 * T, "fp8": 242.5 * T}),
    Device("AMD Instinct MI300X", r"MI300X", {"fp64": 163.4 * T, "fp32": 163.4 * T, "tf32": 653.7 * T, "bf16": 1307.4 * T, "fp16": 1307.4 * T, "fp8": 2614.9 * T}),
    Device("AMD Instinct MI250X", r"MI250X?\b", {"fp64": 95.7 * T, "fp32": 95.7 * T, "bf16": 383 * T, "fp16": 383 * T}),
)  # fmt: skip
#: Devices PyTorch shows as several (an MI250X package is two GCDs, each one torch device).
_PER_DEVICE: dict[str, float] = {"AMD Instinct MI250X": 0.5}

_DTYPE_ALIASES = {
    "float64": "fp64", "double": "fp64", "float32": "fp32", "float": "fp32", "tensorfloat32": "tf32",
    "bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float8": "fp8", "float8_e4m3fn": "fp8",
    "float8_e5m2": "fp8", "float8_e4m3fnuz": "fp8", "float8_e5m2fnuz": "fp8",
}  # fmt: skip


def dtype_name(value: Any) -> str | None:
    """``bf16`` for ``torch.bfloat16``, ``"bfloat16"`` or ``"bf16"``; None for anything else."""
    text = str(value).lower().removeprefix("torch.")
    text = _DTYPE_ALIASES.get(text, text)
    return text if text in DTYPES else None


def recognise(name: str) -> Device | None:
    """The device of the table whose pattern matches a reported name (``NVIDIA A100-SXM4-80GB``,
    ``NVIDIA H100 80GB HBM3``, ``AMD Instinct MI300X``); None for any other."""
    for device in DEVICES:
        if re.search(device.pattern, name, re.IGNORECASE):
            return device
    return None


def device_peak(device: Device, dtype: str) -> float | None:
    """Peak dense FLOP/s of one torch device of ``device`` for ``dtype``; None where the table has none."""
    peak = device.peaks.get(dtype)
    return None if peak is None else peak * _PER_DEVICE.get(device.name, 1.0)


@dataclass(frozen=True)
class Peak:
    """The FLOP/s a profile's MFU is measured against, and where that figure came from."""

    flops_per_s: float
    """NaN when unknown."""
    device: str | None = None
    """The recognised device (:attr:`Device.name`) or the reported name of an unknown one."""
    dtype: str | None = None
    source: str = ""
    """``given`` (``peak_flops=``), ``table`` (the device and data type), or why it is unknown."""

    def to_json(self) -> dict[str, Any]:
        value = self.flops_per_s
        return {"flops_per_s": value if value == value else None, "device": self.device, "dtype": self.dtype,
                "source": self.source}  # fmt: skip


def device_names(meta: dict[str, Any]) -> list[str]:
    """The accelerator names a profile's metadata reports: a trace's ``deviceProperties`` (what
    kineto writes), which a live run fills from ``torch.cuda.get_device_properties``."""
    props = meta.get("deviceProperties")
    if not isinstance(props, list):
        return []
    return [str(p["name"]) for p in props if isinstance(p, dict) and isinstance(p.get("name"), str) and p["name"]]


def device_memory(meta: dict[str, Any]) -> float | None:
    """The first accelerator's memory in bytes (``totalGlobalMem``), where reported."""
    props = meta.get("deviceProperties")
    if isinstance(props, list):
        for p in props:
            if isinstance(p, dict) and isinstance(p.get("totalGlobalMem"), (int, float)) and p["totalGlobalMem"] > 0:
                return float(p["totalGlobalMem"])
    return None


def choose_peak(meta: dict[str, Any], given: float | str | None, has_device: bool) -> Peak:
    """The peak a profile is measured against.

    ``given`` wins: a number is FLOP/s; a data type name (``"bf16"``) picks the recognised
    device's figure for it. Otherwise the device named in ``meta`` (``deviceProperties``), at the
    run's ``compute_dtype`` (what the capture saw: the parameters' dtype, autocast's, TF32 where
    float32 matmuls may use it). A profile without a device, an unknown device or an unknown data
    type has no peak: NaN, and ``source`` says why.
    """
    nan = float("nan")
    names = device_names(meta)
    device = next((d for d in map(recognise, names) if d is not None), None)
    reported = device.name if device is not None else (names[0] if names else None)
    if isinstance(given, (int, float)) and not isinstance(given, bool):
        if not given > 0:
            raise ValueError(f"peak_flops must be a positive number of FLOP/s, got {given!r}")
        return Peak(float(given), reported, None, "given")
    dtype = dtype_name(given) if given is not None else dtype_name(meta.get("compute_dtype"))
    if given is not None and dtype is None:
        raise ValueError(f"peak_flops must be FLOP/s or a data type ({', '.join(DTYPES)}), got {given!r}")
    if not has_device or not names:
        return Peak(nan, None, dtype, "no accelerator in this profile: pass peak_flops= (FLOP/s) for an MFU of CPU time")
    if device is None:
        return Peak(nan, reported, dtype, f"{reported} is not in torchprof's table of peaks: pass peak_flops= (FLOP/s)")
    if dtype is None:
        return Peak(nan, device.name, None, "the data type the run computed in is unknown: pass peak_flops='bf16' "
                                            "(or fp32, tf32, fp16, fp8) or a number of FLOP/s")  # fmt: skip
    peak = device_peak(device, dtype)
    if peak is None:
        return Peak(nan, device.name, dtype, f"torchprof's table has no {dtype} peak for {device.name}: pass peak_flops=")
    return Peak(peak, device.name, dtype, "table")
