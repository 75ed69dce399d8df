"""The filter registry: names -> float32 taps (or banks of taps) or a convolution layer, spec
parsing and validation.

A spec string is ``name[:key=value,...]``, e.g. ``gaussian:sigma=1.5`` or
``custom:taps=0,-1,0;-1,5,-1;0,-1,0``. Commas inside a value are allowed: a
comma-separated piece without ``=`` continues the previous value.

Every filter is a correlation (like ``cv2.filter2D``) with the same taps on every
channel; docs/filters.md says what a filter computes. A *bank* is several tap matrices of one
size combined per pixel (``edge`` is the Sobel gradient magnitude). The filter named ``bank``
is no bank in that sense, but a convolution layer (:mod:`streamconv.nn.layer`): the name is
kept for the command line and presets; inside, it is a *layer*. Taps and weights are read from
text and files by :mod:`streamconv.files.tapfiles`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..errors import FilterSpecError
from ..nn.layer import ConvLayer, load_layer
from .resample import GEOMETRY_FILTERS, Geometry
from .suggest import did_you_mean
from ..files.tapfiles import MAX_SIZE, load_taps_file, parse_inline_taps, show_value, validate_taps
from .temporal import TEMPORAL_TYPES, TemporalTaps, TemporalType

# Re-exported: their home is files/tapfiles.
__all__ = ["MAX_SIZE", "show_value", "validate_taps"]

COMBINE_NONE = "none"
COMBINE_MAGNITUDE = "magnitude"


@dataclass(frozen=True)
class FilterStage:
    """One filter stage: K x K float32 taps, a bank of them combined per pixel, or a convolution
    layer.

    Attributes:
        name: registry name, e.g. ``"gaussian"``.
        params: the parameters it was built from, after defaults.
        taps: one (K, K) float32 C-contiguous read-only host array per bank member.
        combine: ``"none"`` for a single matrix, ``"magnitude"`` for sqrt(a^2 + b^2) of two.
        layer: for the ``bank`` filter, a :class:`streamconv.nn.layer.ConvLayer` (a convolution
            layer whose maps make the frame); ``taps`` is then empty. None otherwise.
        geometry: for ``scale`` and ``crop``, what they do to the frame's size
            (:class:`streamconv.chain.resample.Geometry`); ``taps`` is then empty. None otherwise.
        temporal: for a filter across frames, its T x K x K taps (``taps`` is then empty).
    """

    name: str
    params: Mapping[str, Any]
    taps: tuple[np.ndarray, ...]
    combine: str = COMBINE_NONE
    layer: ConvLayer | None = None
    geometry: Geometry | None = None
    temporal: TemporalTaps | None = None

    @property
    def size(self) -> int:
        """Side K of the tap matrices (1 for a geometry stage)."""
        if self.geometry is not None:
            return 1
        if self.temporal is not None:
            return self.temporal.size
        return self.layer.size if self.layer is not None else int(self.taps[0].shape[0])

    @property
    def radius(self) -> int:
        """Halo width R = (K - 1) / 2."""
        return (self.size - 1) // 2

    def describe(self) -> str:
        """A one-line label, e.g. ``gaussian:sigma=1.5 (9x9)``."""
        shown = ",".join(f"{k}={_format_value(v)}" for k, v in self.params.items() if k != "taps")
        label = f"{self.name}:{shown}" if shown else self.name
        detail = f" x{len(self.taps)} {self.combine}" if len(self.taps) > 1 else ""
        if self.layer is not None:
            detail = f", {self.layer.channels} -> {self.layer.maps} maps"
        if self.temporal is not None:
            causal = ", causal" if self.temporal.causal else ""
            detail = f" x {self.temporal.frames} frames{causal}"
        return label if self.geometry is not None else f"{label} ({self.size}x{self.size}{detail})"


@dataclass(frozen=True)
class Param:
    """A filter parameter: its type (int, float, bool or str), default and help text."""

    kind: type
    default: Any
    help: str


@dataclass(frozen=True)
class FilterType:
    """A registry entry: how to build a FilterStage from parameters."""

    name: str
    summary: str
    build: Callable[..., FilterStage]
    params: Mapping[str, Param] = field(default_factory=dict)


def _format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _odd_size(value: int, what: str) -> int:
    if value < 1 or value % 2 == 0 or value > MAX_SIZE:
        raise FilterSpecError(f"{what}: size must be odd and 1..{MAX_SIZE}, got {value}")
    return value


def _single(name: str, params: Mapping[str, Any], taps: Any) -> FilterStage:
    return FilterStage(name=name, params=dict(params), taps=(validate_taps(taps, what=name),))


def _identity() -> FilterStage:
    return _single("identity", {}, [[1.0]])


def _box(size: int) -> FilterStage:
    _odd_size(size, "box")
    return _single("box", {"size": size}, np.full((size, size), 1.0 / (size * size)))


def gaussian_taps_1d(sigma: float, size: int) -> np.ndarray:
    """Normalized 1-D Gaussian weights, shape (size,), float64 (host)."""
    offsets = np.arange(size, dtype=np.float64) - (size - 1) / 2
    if sigma < 0.01:
        # Every off-centre weight is exp(-5000) or less, i.e. exactly 0: return that delta
        # directly, as 2 * sigma**2 underflows to 0 for tiny sigma (0 / 0 = NaN at the centre).
        return (offsets == 0).astype(np.float64)
    weights = np.exp(-(offsets**2) / (2.0 * sigma * sigma))
    return weights / weights.sum()


def _gaussian(sigma: float, size: int) -> FilterStage:
    if not (sigma > 0 and math.isfinite(sigma)):
        raise FilterSpecError(f"gaussian: sigma must be a positive number, got {sigma:g}")
    if size == 0:
        # 3 * sigma is inf for sigma near 1e308, which math.ceil cannot take.
        size = 2 * math.ceil(3 * sigma) + 1 if math.isfinite(3 * sigma) else math.inf
        if size > MAX_SIZE:
            raise FilterSpecError(
                f"gaussian: sigma={sigma:g} needs size {size} > {MAX_SIZE}; "
                f"pass size={MAX_SIZE} to truncate it"
            )
    _odd_size(size, "gaussian")
    weights = gaussian_taps_1d(sigma, size)
    return _single("gaussian", {"sigma": sigma, "size": size}, np.outer(weights, weights))


def _sharpen(amount: float) -> FilterStage:
    if not math.isfinite(amount):
        raise FilterSpecError(f"sharpen: amount must be finite, got {amount}")
    a = amount
    return _single("sharpen", {"amount": a}, [[0, -a, 0], [-a, 1 + 4 * a, -a], [0, -a, 0]])


SOBEL_X = np.array([[-1, 0, 1], [-2, 0, 2], [-1, 0, 1]], dtype=np.float32)
SOBEL_Y = SOBEL_X.T.copy()


def _edge() -> FilterStage:
    taps = (validate_taps(SOBEL_X, what="edge"), validate_taps(SOBEL_Y, what="edge"))
    return FilterStage(name="edge", params={}, taps=taps, combine=COMBINE_MAGNITUDE)


def _custom(taps: str, file: str, normalize: bool) -> FilterStage:
    if bool(taps) == bool(file):
        raise FilterSpecError("custom: give exactly one of taps=... or file=PATH")
    matrix = parse_inline_taps(taps) if taps else load_taps_file(file)
    if normalize:
        total = float(matrix.sum())
        if not math.isfinite(total) or abs(total) < 1e-12:
            raise FilterSpecError(f"custom: cannot normalize taps that sum to {total:g}")
        matrix = matrix / total
    params: dict[str, Any] = {"file": file} if file else {}
    if normalize:
        params["normalize"] = True
    return FilterStage(name="custom", params=params,
                       taps=(validate_taps(matrix, what="custom taps"),))


def _layer(file: str, relu: bool, pool: int) -> FilterStage:
    """The ``bank`` filter: a convolution layer read from ``file`` (the CLI name stays ``bank``)."""
    if not file:
        raise FilterSpecError("bank: give the weights as file=PATH.npy (M x C x K x K)")
    layer = load_layer(file, relu=relu, pool=pool)
    params: dict[str, Any] = {"file": file, "relu": relu, "pool": pool}
    return FilterStage(name="bank", params=params, taps=(), layer=layer)


def _geometry(name: str, make: Callable[..., Geometry]) -> Callable[..., FilterStage]:
    """A builder of a ``scale`` or ``crop`` stage: no taps, a :class:`Geometry`."""
    return lambda **params: FilterStage(name, params, (), geometry=make(**params))


def _fixed(name: str, taps: Any) -> Callable[[], FilterStage]:
    return lambda: _single(name, {}, taps)


REGISTRY: dict[str, FilterType] = {
    entry.name: entry
    for entry in (
        FilterType("identity", "copies the frame (1x1 tap of 1)", _identity),
        FilterType("box", "mean over a size x size window", _box,
                   {"size": Param(int, 3, "odd window side, 1..31")}),
        FilterType("gaussian", "Gaussian blur", _gaussian,
                   {"sigma": Param(float, 1.0, "standard deviation in pixels"),
                    "size": Param(int, 0, "odd window side; default 2*ceil(3*sigma)+1")}),
        FilterType("sharpen", "Laplacian sharpening: identity minus amount x Laplacian", _sharpen,
                   {"amount": Param(float, 1.0, "strength; 1 gives 0,-1,0;-1,5,-1;0,-1,0")}),
        FilterType("emboss", "3x3 emboss (-2,-1,0;-1,1,1;0,1,2)",
                   _fixed("emboss", [[-2, -1, 0], [-1, 1, 1], [0, 1, 2]])),
        FilterType("laplacian", "3x3 Laplacian (0,1,0;1,-4,1;0,1,0); negative responses clip to 0",
                   _fixed("laplacian", [[0, 1, 0], [1, -4, 1], [0, 1, 0]])),
        FilterType("sobel-x", "3x3 Sobel, horizontal gradient; negative responses clip to 0",
                   _fixed("sobel-x", SOBEL_X)),
        FilterType("sobel-y", "3x3 Sobel, vertical gradient; negative responses clip to 0",
                   _fixed("sobel-y", SOBEL_Y)),
        FilterType("edge", "Sobel gradient magnitude sqrt(gx^2 + gy^2): a bank of two 3x3 taps",
                   _edge),
        FilterType("custom", "your own taps, inline or from a .txt/.npy file", _custom,
                   {"taps": Param(str, "",
                                  "rows split by ';', values by ',': 0,-1,0;-1,5,-1;0,-1,0"),
                    "file": Param(str, "", "path of a .npy or text file of taps"),
                    "normalize": Param(bool, False, "divide the taps by their sum")}),
        FilterType("bank", "a convolution layer: M maps of C x K x K weights, shown as grey (M=1), "
                   "colour (M=C) or a mosaic", _layer,
                   {"file": Param(str, "",
                                  "a .npy of M x C x K x K weights (K odd; zero padding K//2)"),
                    "relu": Param(bool, False, "clip negative map values to 0 before pooling"),
                    "pool": Param(int, 1, "max-pool the maps over pool x pool windows")}),
    )
}
REGISTRY.update({name: FilterType(name, summary, _geometry(name, make),
                                  {key: Param(*param) for key, param in params.items()})
                 for name, summary, make, params in GEOMETRY_FILTERS})


def _temporal_entry(entry: TemporalType) -> FilterType:
    """A filter across frames (:mod:`streamconv.chain.temporal`) as a registry entry."""
    def build(**values: Any) -> FilterStage:
        shown = {key: value for key, value in values.items() if value != ""}
        return FilterStage(entry.name, shown, (), temporal=entry.build(**values))
    params = {key: Param(*param) for key, param in entry.params.items()}
    return FilterType(entry.name, entry.summary, build, params)


REGISTRY.update((entry.name, _temporal_entry(entry)) for entry in TEMPORAL_TYPES)


def _coerce(filter_name: str, key: str, param: Param, value: Any) -> Any:
    """Turn a spec string or a TOML value into the parameter's type."""
    what = f"{filter_name}: {key}"
    if isinstance(value, int) and not isinstance(value, bool) and not -(1 << 63) <= value < 1 << 63:
        # TOML integers are 64-bit, but tomllib reads 0x... of any length: such an int overflows
        # float() and str() below, and no parameter has a use for it.
        raise FilterSpecError(f"{what}: integer out of range ({value.bit_length()} bits)")
    if param.kind is bool:
        if isinstance(value, bool):
            return value
        # Only scalars: str() of a list holding a huge int raises ValueError.
        text = str(value).strip().lower() if isinstance(value, (str, int, float)) else None
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise FilterSpecError(f"{what}: expected a boolean (1/0/true/false), got "
                              f"{show_value(value)}")
    if param.kind is int:
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise FilterSpecError(f"{what}: expected an integer, got {show_value(value)}")
        try:
            return int(value) if not isinstance(value, str) else int(value.strip(), 10)
        except (TypeError, ValueError):
            raise FilterSpecError(f"{what}: expected an integer, got {show_value(value)}") from None
    if param.kind is float:
        if isinstance(value, bool):
            raise FilterSpecError(f"{what}: expected a number, got {show_value(value)}")
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise FilterSpecError(f"{what}: expected a number, got {show_value(value)}") from None
        if not math.isfinite(number):
            raise FilterSpecError(f"{what}: expected a finite number, got {show_value(value)}")
        return number
    if not isinstance(value, str):
        raise FilterSpecError(f"{what}: expected a string, got {show_value(value)}")
    return value


def build_filter(name: str, params: Mapping[str, Any] | None = None) -> FilterStage:
    """Build a registered filter from its name and parameters (strings or typed values).

    Raises:
        FilterSpecError: unknown name (the message lists the known ones), unknown or
            ill-typed parameter, or invalid resulting taps. Names, keys and values are quoted
            cut to MAX_QUOTED_CHARS characters (they may come from a preset file).
    """
    entry = REGISTRY.get(name)
    if entry is None:
        raise FilterSpecError(f"unknown filter {show_value(name)}{did_you_mean(name, REGISTRY)}; "
                              f"known filters: {', '.join(REGISTRY)}")
    given = dict(params or {})
    unknown = sorted(set(given) - set(entry.params))
    if unknown:
        known = ", ".join(entry.params) or "none"
        raise FilterSpecError(f"{name}: unknown parameter {show_value(unknown[0])} (parameters: "
                              f"{known})")
    values = {
        key: _coerce(name, key, param, given[key]) if key in given else param.default
        for key, param in entry.params.items()
    }
    return entry.build(**values)


def split_spec(spec: str) -> tuple[str, dict[str, str]]:
    """Split ``name[:key=value,...]`` into the name and a dict of raw string values."""
    if not isinstance(spec, str) or not spec.strip():
        raise FilterSpecError("empty filter spec")
    name, _, rest = spec.strip().partition(":")
    name = name.strip().lower()
    params: dict[str, str] = {}
    last_key: str | None = None
    for piece in rest.split(",") if rest.strip() else []:
        key, eq, value = piece.partition("=")
        if eq:
            key = key.strip().lower()
            if not key:
                raise FilterSpecError(f"filter spec {spec!r}: missing parameter name before '='")
            if key in params:
                raise FilterSpecError(f"filter spec {spec!r}: parameter {key!r} given twice")
            params[key] = value.strip()
            last_key = key
        elif last_key is not None:
            params[last_key] += "," + piece.strip()
        else:
            raise FilterSpecError(f"filter spec {spec!r}: expected key=value after ':', got "
                                  f"{piece!r}")
    return name, params


def parse_filter(spec: str | FilterStage) -> FilterStage:
    """Parse one spec string (``name[:key=value,...]``) into a FilterStage; a FilterStage passes
    through.

    Examples:
        >>> stage = parse_filter("gaussian:sigma=1.5")
        >>> stage.size, stage.taps[0].dtype.name
        (11, 'float32')
        >>> parse_filter("custom:taps=0,-1,0;-1,5,-1;0,-1,0").taps[0][1].tolist()
        [-1.0, 5.0, -1.0]
    """
    if isinstance(spec, FilterStage):
        return spec
    name, params = split_spec(spec)
    return build_filter(name, params)


def parse_chain(specs: Sequence[str | FilterStage] | str | FilterStage) -> list[FilterStage]:
    """Parse several specs; they run in order, each stage rounding to uint8. One spec given
    alone is a chain of one (its characters were taken for specs one by one)."""
    specs = [specs] if isinstance(specs, (str, FilterStage)) else specs
    return [parse_filter(spec) for spec in specs]


def describe_registry() -> str:
    """The text of ``streamconv filters``: each filter, its summary and parameters."""
    lines = []
    for entry in REGISTRY.values():
        lines.append(f"{entry.name:<10} {entry.summary}")
        for key, param in entry.params.items():
            default = _format_value(param.default) if param.default not in ("", 0) else "-"
            if entry.name == "gaussian" and key == "size":
                default = "auto"
            lines.append(f"{'':<12}{key}={param.kind.__name__} (default {default}): {param.help}")
    lines.append("")
    lines.append("Spec: NAME[:KEY=VALUE,...]; repeat --filter to chain stages in order.")
    return "\n".join(lines)
