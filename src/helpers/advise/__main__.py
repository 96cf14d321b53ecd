"""``python -m helpers.advise MODEL --input-shape 3,224,224 --batch 256``: will more GPUs help this model?

MODEL is one of the book's models (LinearNet, ConvNet) or ``module:callable``, a factory returning an
``nn.Module``, importable from the current directory. Without ``--measure`` nothing is trained: the model
is counted exactly and priced on every machine of chapter 5's table. Bad input stops with one line
saying what is wrong, before anything runs.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from helpers.advise import counting, held_out, measure, predict, report, validate
from helpers.costmodel import validate as validate_costs
from helpers.models import MODELS
from helpers.results import ResultStore


def arguments(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m helpers.advise", description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help=f"{' or '.join(MODELS)}, or module:callable returning an nn.Module")
    parser.add_argument(
        "--input-shape", help="one sample's shape, e.g. 3,224,224 (the book's models: 1,12000)"
    )
    parser.add_argument("--batch", type=int, required=True, help="the global batch")
    parser.add_argument("--dtype", default="float32", help="float32 or bf16 (autocast)")
    parser.add_argument("--optimizer", default="adam", help="adam or sgd")
    parser.add_argument(
        "--samples-per-epoch",
        type=int,
        help=f"the samples of one epoch, for hours and dollars (default: FSDD's training split, "
        f"{predict.DEFAULT_EPOCH:,} clips)",
    )
    parser.add_argument("--gpus", default="1,2,4,8", help="GPU counts to price, e.g. 1,4,8")
    parser.add_argument(
        "--hour-value",
        type=float,
        help="dollars an hour of waiting for a result is worth to you: adds each machine's total cost",
    )
    parser.add_argument("--measure", action="store_true", help="time the model and the all-reduce here")
    parser.add_argument("--validate", type=int, metavar="K", help="run real DDP on K ranks here and compare")
    parser.add_argument("--launches", type=int, default=3, help="independent launches per --validate point")
    parser.add_argument("--results-run", default="advise", help="folder of data/results for measurements")
    parser.add_argument("--time-limit", type=float, default=600, help="seconds any one launch may take")
    parser.add_argument("--json", help="write every number with its source to this file")
    parser.add_argument("--figure", help="write speed-up against dollars to this PNG")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = arguments(argv)
    started = time.perf_counter()
    try:
        gpu_counts = tuple(counting.parse_shape(args.gpus, "--gpus", "1,4,8"))
        model = counting.load_model(args.model)
        if args.input_shape is None and args.model not in MODELS:
            raise counting.AdviseError("--input-shape is needed for a model of your own (e.g. 3,224,224)")
        if args.hour_value is not None and not args.hour_value >= 0:
            raise counting.AdviseError(f"--hour-value needs dollars of zero or more, not {args.hour_value:g}")
        if args.validate is not None and args.validate < 1:
            raise counting.AdviseError(f"--validate needs a positive number of ranks, not {args.validate}")
        predict.check_batch(args.batch, gpu_counts)  # refused before the model is counted
        predict.epoch(args.batch, args.samples_per_epoch)  # refused before the model is counted
        if args.model in MODELS and args.input_shape is None and args.dtype == "float32":
            counted = counting.count_book_model(args.model, args.optimizer)
        else:
            shape = counting.parse_shape(args.input_shape or "1,12000")
            counted = counting.count(model, shape, args.dtype, args.optimizer, label=args.model)
        measured_steps = validation = None
        computes = validate_costs.stored_gpu_computes(counted) or None  # the study's GPU profiles of it
        if args.measure or args.validate:
            store = ResultStore(args.results_run)
            device = "cuda" if torch.cuda.is_available() else "cpu"
            smallest = max(1, args.batch // max(*gpu_counts, args.validate or 1))
            batches = sorted(
                {smallest, args.batch} if smallest < args.batch else {args.batch, 2 * args.batch}
            )
            measured_steps = measure.measure_steps(store, args.model, counted, batches, device=device,
                                                   time_limit_seconds=args.time_limit)  # fmt: skip
            computes = {**(computes or {}), **measure.measured_computes(measured_steps)} or None
        advice = predict.advise(counted, args.batch, gpu_counts, args.samples_per_epoch, computes)
        if args.validate:
            backend = "nccl" if device == "cuda" and torch.cuda.device_count() >= args.validate else "gloo"
            model_time = measure.time_model(store, measured_steps, counted.parameters, backend, device)
            world_sizes = sorted({1, args.validate})
            validation = validate.validate(store, args.model, counted, args.batch, world_sizes, model_time,
                                           backend=backend, device=device, launches=args.launches,
                                           time_limit_seconds=args.time_limit)  # fmt: skip
    except counting.AdviseError as error:
        print(f"advise: error: {error}", file=sys.stderr)
        return 2
    shown = measure.step_table(measured_steps) if measured_steps is not None else None
    print(report.render(advice, shown, args.hour_value))
    if validation is not None:
        print("\nDDP here, predicted (from the single-device measurements) against measured:")
        print(report.text_table(held_out.validation_view(validation)))
    if args.json:
        report.write_json(args.json, advice, measured_steps, validation)
    if args.figure:
        report.write_figure(args.figure, advice)
    print(f"\n({time.perf_counter() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
