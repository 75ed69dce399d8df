"""The run's settings from the command's options, made once: the chain and its border, the
:class:`~streamconv.run.settings.RunSettings` and the
:class:`~streamconv.run.settings.EncodeSettings` that ``run``, ``run --segments``, several
SOURCEs and ``batch`` hand on whole."""

from __future__ import annotations

import argparse
import logging

from ..chain.filters import FilterStage, parse_chain
from ..chain.presets import load_preset
from ..frames.borders import DEFAULT_BORDER
from ..run.settings import EncodeSettings, RunSettings

log = logging.getLogger("streamconv")


def run_chain(args: argparse.Namespace) -> tuple[list[FilterStage], str]:
    """The stages (the --pipeline preset's, then the --filter specs) and the border mode."""
    border = args.border
    stages = []
    if args.pipeline:
        preset = load_preset(args.pipeline)
        stages.extend(preset.filters)
        border = border or preset.border
    stages.extend(parse_chain(args.filters))
    args.chain_files = chain_files(stages)
    border = border or DEFAULT_BORDER
    if not stages:
        log.warning("no --filter or --pipeline given: frames pass through unchanged")
    return stages, border


def chain_files(stages: list[FilterStage]) -> dict[str, str]:
    """The files the stages were read from (``file=`` of conv3d, custom, bank), by role
    (``"conv3d's file"``; a second of one filter ``"conv3d's file 2"``): inputs of the run, which
    nothing it writes may replace."""
    files: dict[str, str] = {}
    for stage in stages:
        path = stage.params.get("file")
        if isinstance(path, str) and path:
            role, number = f"{stage.name}'s file", 1
            while role in files:
                number += 1
                role = f"{stage.name}'s file {number}"
            files[role] = path
    return files


def run_settings(args: argparse.Namespace, border: str) -> RunSettings:
    """How every stream of the command runs (``batch`` has no --device, --max-pixels or
    --max-frames: their defaults)."""
    return RunSettings(backend=args.backend, device=getattr(args, "device", 0) or 0, border=border,
                       kernel=args.kernel, ring=args.ring, decoder=args.decoder, colour=args.colour,
                       depth=None if args.depth == "auto" else int(args.depth),
                       **{name: getattr(args, name) for name in ("max_pixels", "max_frames")
                          if hasattr(args, name)})


def encoder_names(args: argparse.Namespace) -> list[tuple[str | None, str]]:
    """The encoder group's names, each with its option: none may be given empty."""
    return [(args.codec, "--codec"), (args.pix_fmt, "--pix-fmt"), (args.codec_preset, "--preset")]


def encode_settings(args: argparse.Namespace) -> EncodeSettings:
    """What the encoder group sets (``run``, ``run --segments``, ``batch``)."""
    return EncodeSettings(codec=args.codec, pix_fmt=args.pix_fmt, crf=args.crf,
                          bitrate=args.bitrate, preset=args.codec_preset)
