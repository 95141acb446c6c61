"""``prof.to_markdown()`` and ``python -m torchprof --md``: a summary to paste, at most 4 KB, with
the same sections every time and the same text across runs apart from the figures."""

from __future__ import annotations

import re

import pytest

from conftest import shared_trace

#: A figure as the summary writes it: a number and its unit (``812µs``, ``1.20ms``, ``31%``,
#: ``3.64G``, ``1.50 KB``, ``12.3GFLOP/s``).
FIGURE = re.compile(r"-?\d+(?:\.\d+)?(?:µs|ms|s|%|[kMGT]?FLOP/s|[kMGT]| [KMG]?B)?")
SECTIONS = ["### torchprof: ", "**Costliest layers**", "**Insights:**", "**MFU:**", "**Memory:**", "**Steps:**",
            "**Not counted:**"]


def run_once():
    import torch

    import torchprof

    class Mix(torch.nn.Module):  # eight 256x256x256 matmuls: hundreds of times Net.small's work
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(256, 256) / 16)

        def forward(self, x):
            for _ in range(8):
                x = torch.tanh(x @ self.w)
            return x

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.big, self.small = Mix(), torch.nn.Linear(256, 4)

        def forward(self, x):
            return self.small(self.big(x))

    torch.manual_seed(0)
    net = Net()
    x = torch.randn(256, 256)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # on a busy machine, intra-op threads spinning on each other drown a small layer's time
    try:
        net(x).sum().backward()
        with torchprof.Profiler(memory=True) as prof:
            net(x).sum().backward()
    finally:
        torch.set_num_threads(threads)
    return prof.to_markdown()


#: An insight as the summary lists it, or the line saying none fired.
INSIGHT = re.compile(r"^(?:N\. \*\*[a-z_]+\*\* \(.*\): .+|No rule fired: .+|N more in prof\.insights\(\)\.)$")


def masked(text: str) -> list[str]:
    """The text with every figure replaced, the costliest layers' rows in name order (their order
    is a figure too), and each insight as ``INSIGHT``: which rules fire follows the timings (a
    stall under load is Python overhead for a step this small), so it is a figure too."""
    lines = [FIGURE.sub("N", line) for line in text.splitlines()]
    start = lines.index("**Insights:**") if "**Insights:**" in lines else len(lines)
    for i in range(start + 1, len(lines)):
        if any(lines[i].startswith(s) for s in SECTIONS):
            break
        if lines[i]:
            assert INSIGHT.match(lines[i]), lines[i]
            lines[i] = "INSIGHT"
    lines = [line for n, line in enumerate(lines) if line != "INSIGHT" or lines[n - 1] != "INSIGHT"]
    table = [i for i, line in enumerate(lines) if line.startswith("| `")]
    rows = sorted(lines[i] for i in table)
    for i, row in zip(table, rows):
        lines[i] = row
    return lines


@pytest.fixture(scope="module")
def two_runs():
    return run_once(), run_once()


def test_two_runs_give_the_same_summary_apart_from_the_figures(two_runs):
    first, second = two_runs
    assert masked(first) == masked(second)
    assert "| `Net.big` | Mix | N (N) | N | N | - |" in masked(first)  # only the figures are masked


def test_the_summary_has_every_section_in_order_and_fits_4_kb(two_runs):
    text = two_runs[0]
    assert len(text.encode("utf-8")) <= 4096
    at = [text.index(s) for s in SECTIONS]
    assert at == sorted(at)
    assert text.splitlines()[2].startswith("**Costliest layer: Net.big (Mix)")
    assert "| `Net.big` | Mix |" in text and "**Steps:** none marked" in text
    assert "**Memory:** cpu peak" in text and "parameter" in text  # what the peak is made of
    assert "**Insights:**\n\nNo rule fired" in text


def test_a_large_profile_is_cut_to_4_kb(tmp_path):
    import torchprof

    prof = torchprof.load_trace(shared_trace("a100-ddp-training.json.gz"), peak_flops="tf32")
    text = prof.to_markdown(tmp_path / "summary.md")
    assert len(text.encode("utf-8")) <= 4096 and (tmp_path / "summary.md").read_text(encoding="utf-8") == text
    assert all(s in text for s in SECTIONS)
    # (its embedding lookups, fbgemm's, have no formula: the run's FLOPs, so its MFU, are unknown)
    assert "1. **exposed_communication**" in text and "**MFU:** unknown: the FLOPs are unknown (prof.unsupported_ops" in text
    assert "**Steps:** 6 steps, median" in text


def test_the_command_line_prints_or_writes_the_summary(tmp_path, capsys):
    from torchprof._cli import main

    trace = str(shared_trace("a100-alexnet-forward.json.gz"))
    assert main(["--md", "-", trace]) == 0
    out = capsys.readouterr().out
    assert out.startswith("### torchprof: a100-alexnet-forward\n") and "| Node" not in out  # the summary alone
    target = tmp_path / "s.md"
    assert main(["--md", str(target), trace]) == 0
    out = capsys.readouterr().out
    assert "| Node" in out and f"torchprof: wrote {target}" in out
    assert target.read_text(encoding="utf-8").startswith("### torchprof: a100-alexnet-forward")
    assert main(["--md", str(tmp_path / "missing" / "s.md"), trace]) == 2  # its folder does not exist


def test_flops_unknown_for_ops_of_unknown_cost_are_said_in_the_summary_and_the_header():
    # The root's FLOPs were NaN while "Not counted" said "nothing the profiler knows of", and the
    # widget's header left FLOPs out without a word: both now name the ops, as the table does.
    import torch

    import torchprof
    from torchprof._views.format import summary_items

    class Spectrum(torch.nn.Module):  # an FFT: arithmetic torchprof has no formula for
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(4, 4)

        def forward(self, x):
            return torch.fft.rfft(self.layer(x))

    layer = Spectrum()
    with torchprof.Profiler() as prof, torch.no_grad():
        layer(torch.randn(2, 4))
    assert prof.unsupported_ops == {"aten::_fft_r2c": 1}
    text = prof.to_markdown()
    said = ("- FLOPs are unknown (?) in the rows that hold 1 call of ops of unknown cost (aten::_fft_r2c): "
            "no formula, or a cost that depends on the values; every other row keeps its count, and prof.unsupported_ops lists them")
    assert said in text.split("**Not counted:**", 1)[1]
    assert "nothing the profiler knows of" not in text
    flops = [item for item in summary_items(prof.summary) if item[0] == "FLOPs"]
    assert len(flops) == 1 and flops[0][1] == "?" and "aten::_fft_r2c" in flops[0][2]
    with torchprof.Profiler(shapes=True) as known, torch.no_grad():
        layer.layer(torch.randn(2, 4))
    assert "**Not counted:** nothing the profiler knows of." in known.to_markdown()
    assert [item[1] for item in summary_items(known.summary) if item[0] == "FLOPs"] == ["64"]


def test_steps_marked_without_a_schedule_are_counted_one_way():
    """``prof.step()`` three times without ``schedule=``: torch records no step ranges, but the
    steps were marked and profiled. step_times, the summary and the Markdown all say 3 (the
    summary once said 0 and the Markdown "none recorded")."""
    import torch

    import torchprof

    model = torch.nn.Linear(16, 16)
    x = torch.randn(8, 16)
    with torchprof.Profiler() as prof:
        for _ in range(3):
            model(x).sum().backward()
            prof.step()
    assert len(prof.step_times) == 3 and prof.step_times["recorded"].all()
    assert prof.summary["steps"] == 3
    spread = prof.summary["step_spread"]
    assert spread["min_us"] == prof.step_times["wall_us"].min() and spread["max_us"] == prof.step_times["wall_us"].max()
    line = next(s for s in prof.to_markdown().splitlines() if s.startswith("**Steps:**"))
    assert line.startswith("**Steps:** 3 steps (marked by prof.step(); one tree for all")


def test_a_scheduled_run_counts_its_recorded_steps():
    import torch

    import torchprof

    model = torch.nn.Linear(16, 16)
    x = torch.randn(8, 16)
    with torchprof.Profiler(schedule=torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=1)) as prof:
        for _ in range(5):
            model(x).sum().backward()
            prof.step()
    assert len(prof.step_times) == 5 and int(prof.step_times["recorded"].sum()) == 2
    assert prof.summary["steps"] == 2 == len(prof.steps)
    assert "**Steps:** 2 steps, median" in prof.to_markdown()
