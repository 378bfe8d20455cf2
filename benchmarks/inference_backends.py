"""The network's backends side by side (`search.inference.backend`): the forward's positions/s on
realistic positions, each backend's agreement with eager fp32, and self-play with each.

On a CPU (`--device cpu`), one thread each: eager torch, ONNX Runtime (`onnxruntime`, the default
there), ONNX Runtime with int8 dynamic quantisation (its linear layers only, `int8 linear`, and its
convolutions too, `int8 conv`: not a backend of the framework, measured to decide whether it should
be), and torch_half (bf16); then `mcts_speed.py`'s self-play runner (VectorizeRunner over
search=sequential) with eager torch and ONNX Runtime at `--runner-batches`.

On a GPU (`--device cuda`): eager fp32, fp16 channels-last without graphs (`fp16 eager`), and
torch_half (fp16, channels-last, batch norms folded, a CUDA graph per batch size, cuDNN's algorithms
timed before each capture) and the same with cuDNN's untimed choice, at `--batches` (64,256,1024),
and what `auto` chooses. The goal there: torch_half >= 3x eager fp32 at batch 1024.

Agreement: the share of positions whose top move (the policy's argmax) is the same as eager fp32's,
and the largest value difference, over a batch of 1,024 positions (`auto` requires 99 % and 0.02).
Rates are medians of `--repeats` interleaved repeats, wall time; each ratio is to eager fp32's
median at the same batch, measured in the same run, whose own figure is printed beside it.

    python benchmarks/inference_backends.py [--device auto|cpu|cuda] [--nets "9x9 preset,15x15 default"]
        [--batches 1,8,32,128] [--repeats 5] [--runner-batches 8,32] [--runner-sims 200]
"""

from __future__ import annotations

import argparse
import io
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from mcts_network import measure_batch, realistic_planes
from tables import print_machine, print_table

NETS = {"9x9 preset": (9, 3, 32), "15x15 preset": (15, 4, 32), "15x15 default": (15, 4, 64)}
"""(board, blocks, channels): the 9x9 and 15x15 presets' networks and agent=alphazero's default."""
GPU_GOAL = 3.0
"""torch_half over eager fp32 at the largest batch, on a GPU."""


class Quantized:
    """ONNX Runtime on the network exported and dynamically quantised to int8 (`ops`)."""

    def __init__(self, net: Any, ops: list[str]) -> None:
        import onnxruntime as ort
        import torch
        from onnxruntime.quantization import QuantType, quantize_dynamic

        spec = net.spec
        model = io.BytesIO()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                net,
                (torch.zeros(1, spec["in_planes"], spec["board_size"], spec["board_size"]),),
                model,  # type: ignore[arg-type]
                dynamo=False,
                input_names=["planes"],
                output_names=["logits", "value"],
                dynamic_axes={"planes": {0: "b"}, "logits": {0: "b"}, "value": {0: "b"}},
            )
        with tempfile.TemporaryDirectory() as folder:
            plain, quantized = Path(folder, "net.onnx"), Path(folder, "int8.onnx")
            plain.write_bytes(model.getvalue())
            quantize_dynamic(plain, quantized, weight_type=QuantType.QInt8, op_types_to_quantize=ops)
            options = ort.SessionOptions()
            options.intra_op_num_threads = options.inter_op_num_threads = 1
            self.session = ort.InferenceSession(
                quantized.read_bytes(), options, providers=["CPUExecutionProvider"]
            )

    def __call__(self, planes: np.ndarray) -> tuple[np.ndarray, ...]:
        return tuple(self.session.run(None, {"planes": planes}))


class Fp16Eager:
    """Eager torch in fp16, channels-last, no graphs: what torch_half's graphs add to."""

    def __init__(self, net: Any, device: str) -> None:
        import copy

        import torch

        self.torch, self.device = torch, device
        self.net = copy.deepcopy(net).to(device, torch.float16).to(memory_format=torch.channels_last).eval()

    def __call__(self, planes: np.ndarray) -> tuple[np.ndarray, ...]:
        torch = self.torch
        with torch.inference_mode():
            x = torch.from_numpy(planes).to(self.device, non_blocking=True).half()
            outs = self.net(x.contiguous(memory_format=torch.channels_last))
            return tuple(out.float().cpu().numpy() for out in outs)


def agreement(out: tuple[np.ndarray, ...], ref: tuple[np.ndarray, ...]) -> tuple[float, float]:
    return float((out[0].argmax(1) == ref[0].argmax(1)).mean()), float(np.abs(out[1] - ref[1]).max())


def rates(
    evaluators: dict[str, Callable[..., Any]], planes: np.ndarray, repeats: int
) -> dict[str, list[float]]:
    """Positions/s of each evaluator on `planes`, repeat by repeat, interleaved (alternating order)."""
    found: dict[str, list[float]] = {name: [] for name in evaluators}
    for evaluate in evaluators.values():
        for _ in range(3):
            evaluate(planes)  # untimed: the first calls at this batch size (a graph's capture)
    for r in range(repeats):
        for name in list(evaluators)[:: 1 if r % 2 == 0 else -1]:
            calls, t0 = 0, time.perf_counter()
            while True:
                evaluators[name](planes)
                calls += 1
                elapsed = time.perf_counter() - t0
                if calls >= 5 and elapsed >= 0.3:
                    break
            found[name].append(len(planes) * calls / elapsed)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument("--nets", default=None, help=f"networks, comma-separated, of: {', '.join(NETS)}")
    parser.add_argument(
        "--batches", default=None, help="batch sizes (default 1,8,32,128 on a CPU, 64,256,1024 on a GPU)"
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--runner-batches", default="8,32", help="CPU: the self-play runner's batches (none: '')"
    )
    parser.add_argument("--runner-sims", type=int, default=200, help="CPU: the runner's simulations a move")
    args = parser.parse_args()

    import torch

    from framework_plugins.alphazero.half_evaluator import (
        AUTO_TOP_MOVE,
        AUTO_VALUE,
        HalfEvaluator,
        fastest_on_gpu,
    )
    from framework_plugins.alphazero.network import PolicyValueNet, evaluator_for
    from framework_plugins.gomoku.rules import Gomoku

    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    gpu = device == "cuda"
    torch.set_num_threads(1)  # and ONNX Runtime's sessions take torch's thread count
    names = (args.nets or ("15x15 preset,15x15 default" if gpu else "9x9 preset,15x15 default")).split(",")
    batches = [int(b) for b in (args.batches or ("64,256,1024" if gpu else "1,8,32,128")).split(",")]
    print_machine()
    card = f" ({torch.cuda.get_device_name()})" if gpu else ", one thread each"
    print(
        f"torch {torch.__version__}, device {device}{card}; {args.repeats} interleaved repeats, wall time",
        flush=True,
    )
    forward_lines, agree_lines, runner_lines = [], [], []
    goal = []
    for name in names:
        board, blocks, channels = NETS[name]
        game = Gomoku(board, 5)
        torch.manual_seed(0)
        net = PolicyValueNet(board_size=board, in_planes=game.n_planes, blocks=blocks, channels=channels)
        net.to(device).eval()
        label = f"{name}: {board}x{board}, {blocks}x{channels}"
        evaluators: dict[str, Callable[..., Any]] = {"eager fp32": evaluator_for(net, device, "torch")}
        if gpu:
            evaluators["fp16 eager"] = Fp16Eager(net, device)
            evaluators["torch_half"] = evaluator_for(net, device, "torch_half")
            evaluators["torch_half, cuDNN untuned"] = HalfEvaluator(net, device, autotune=False)
        else:
            evaluators["onnxruntime"] = evaluator_for(net, device, "onnxruntime")
            evaluators["int8 linear"] = Quantized(net, ["MatMul", "Gemm"])
            evaluators["int8 conv"] = Quantized(net, ["Conv", "MatMul", "Gemm"])
            evaluators["torch_half (bf16)"] = evaluator_for(net, device, "torch_half")
        check = realistic_planes(game, 1024, np.random.default_rng(7), max_moves=game.n_actions // 3)
        reference = evaluators["eager fp32"](check)
        for backend, evaluate in list(evaluators.items())[1:]:
            top, value = agreement(evaluate(check), reference)
            ok = "yes" if top >= AUTO_TOP_MOVE and value <= AUTO_VALUE else "NO"
            agree_lines.append([label, backend, f"{top:.1%}", f"{value:.4f}", ok])
        for batch in batches:
            planes = realistic_planes(
                game, batch, np.random.default_rng(batch), max_moves=game.n_actions // 3
            )
            found = rates(evaluators, planes, args.repeats)
            base = statistics.median(found["eager fp32"])
            cells = [f"{base:,.0f}"]
            for backend in list(evaluators)[1:]:
                median = statistics.median(found[backend])
                cells.append(f"{median:,.0f} ({median / base:.2f}x)")
            forward_lines.append([label, str(batch), *cells])
            print(
                f"  {label}, B={batch}: "
                + ", ".join(f"{b} {c}" for b, c in zip(evaluators, cells, strict=True)),
                flush=True,
            )
            if gpu and batch == max(batches):
                goal.append((label, batch, statistics.median(found["torch_half"]) / base, base))
        if gpu:
            fastest_on_gpu(net, device)  # what auto chooses, said in its log line
        elif args.runner_batches:
            runner_args = argparse.Namespace(
                net_sims=args.runner_sims, net_steps=1, net_clock="wall", repeats=args.repeats
            )
            for batch in (int(b) for b in args.runner_batches.split(",")):
                runs = {
                    b: measure_batch(net, game, "cpu", batch, runner_args, b)
                    for b in ("torch", "onnxruntime")
                }
                t, o = (statistics.median(runs[b].runner) for b in ("torch", "onnxruntime"))
                runner_lines.append([label, str(batch), f"{t:,.0f}", f"{o:,.0f} ({o / t:.2f}x)"])

    print(f"\nforward positions/s, medians of {args.repeats} repeats (x eager fp32 at the same batch)\n")
    print_table(["network", "batch", *evaluators], forward_lines)
    print(
        f"\nagreement with eager fp32 over 1,024 positions"
        f" (auto needs >= {AUTO_TOP_MOVE:.0%} and <= {AUTO_VALUE})\n"
    )
    print_table(["network", "backend", "same top move", "largest value difference", "agrees"], agree_lines)
    if runner_lines:
        print(
            f"\nself-play runner simulations/s ({args.runner_sims} a move),"
            f" medians of {args.repeats} repeats\n"
        )
        print_table(["network", "batch", "torch sims/s", "onnxruntime sims/s"], runner_lines)
    for label, batch, ratio, base in goal:
        met = "met" if ratio >= GPU_GOAL else "MISSED"
        print(
            f"  [{met}] {label}: torch_half >= {GPU_GOAL}x eager fp32 at B={batch}: {ratio:.2f}x"
            f" (eager: {base:,.0f} pos/s)"
        )


if __name__ == "__main__":
    main()
