"""`pdd-emu calibrate`: fit a GPU's clock constants from a measurement file.

    pdd-emu calibrate services/profiles/measurements/h200-llama3-8b-layers.json --gpu h200-sxm --write

Prints the fitted constants, every row (measured, predicted, error) and the
MAPE per group; --write stores the constants in the package's gpus.yaml,
--out FILE in a copy of it (method: docs/roofline.md §Calibration).
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from services.cli.errors import fail
from services.engine.roofline_fit import Calibration, Row, calibrate, held_out_eager_mape
from services.profiles import GPUS_YAML, load_gpu, write_gpu_constants
from services.profiles.measurement import read_measurements


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "calibrate",
        help="fit a GPU's roofline constants from measured timings",
        description="Fit a GPU's roofline constants from a measurement file (format: shared/profiles/h200/README.md).",
    )
    parser.add_argument("file", metavar="FILE", help="measurement JSON file")
    parser.add_argument("--gpu", required=True, help="GPU profile the measurements were taken on, e.g. h200-sxm")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--write", action="store_true", help=f"store the constants in {GPUS_YAML.name} of the package")
    target.add_argument("--out", metavar="FILE", help="write a copy of the GPU profiles with the fitted constants")
    parser.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    parser.set_defaults(func=run)


def _table(headers: list[str], rows: list[list[str]], markdown: bool) -> str:
    if markdown:
        lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
        return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows)]
    lines = ("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in [headers, *rows])
    return "\n".join(lines)


def _row_cells(row: Row) -> list[str]:
    measured_us, predicted_us = row.measured_s * 1e6, row.predicted_s * 1e6
    return [row.group, row.label, f"{measured_us:.1f}", f"{predicted_us:.1f}", f"{row.error_pct:+.1f}"]


def report(calibration: Calibration, held_out: dict[str, float], markdown: bool = False) -> str:
    gpu = calibration.gpu
    constants = [[name, f"{c.value:.4g}", c.source] for name, c in gpu.efficiency if c is not None]
    constants += [[f"{style.value}.{name}", f"{c.value:.4g}", c.source]
                  for style, costs in gpu.launch.items() for name, c in costs]
    offsets = ", ".join(f"{group} {s * 1e6:.1f} us" for group, s in calibration.microbenchmark_offsets_s.items())
    headers = ["group", "row", "measured us", "predicted us", "error %"]
    mape = [[group, f"{calibration.mape_pct(group):.2f}", f"{held_out[group]:.2f}" if group in held_out else ""]
            for group in calibration.groups]
    return "\n\n".join([
        f"Constants of {gpu.name}:\n" + _table(["constant", "value", "source"], constants, markdown),
        f"Timing offsets of the single-op benchmarks (fitted, not kept): {offsets}",
        "Microbenchmarks (op fractions fitted here):\n"
        + _table(headers, [_row_cells(r) for r in calibration.micro_rows], markdown),
        "Layer rows (only the launch costs fitted here):\n"
        + _table(headers, [_row_cells(r) for r in calibration.layer_rows], markdown),
        "MAPE per group (held out: eager launch costs refitted without that group):\n"
        + _table(["group", "MAPE %", "held-out MAPE %"], mape, markdown),
    ])


def run(args: argparse.Namespace) -> int:
    try:
        gpu = load_gpu(args.gpu)
        measurements = read_measurements(args.file)
    except ValueError as exc:  # unknown GPU, unreadable or malformed file
        fail(str(exc))
    source = Path(args.file).name
    calibration = calibrate(measurements, gpu, source)
    print(report(calibration, held_out_eager_mape(measurements, calibration, source), args.markdown))
    fitted = calibration.gpu
    if args.write or args.out:
        target = GPUS_YAML if args.write else Path(args.out)
        if args.out:
            try:
                shutil.copyfile(GPUS_YAML, target)
            except OSError as exc:
                fail(f"cannot write {target}: {exc.strerror or exc}")
        write_gpu_constants(fitted.name, fitted.efficiency, fitted.launch, target, calibration=fitted.calibration)
        print(f"\nwrote the constants of {fitted.name} to {target}")
    return 0
