"""Layer-level cost descriptions of DNNs, derived from layer shapes.

A ``GraphBuilder`` walks a network in forward order, tracking the (C, H, W) activation
shape with PyTorch's conv/pool arithmetic, and appends one frozen ``Layer`` per op with its
parameter count, FLOPs and memory traffic. Cost models and schedulers read these records;
nothing here runs a network.

Counting conventions (every figure covers the whole mini-batch of ``batch`` samples):

FLOPs
  * conv / depthwise / pointwise / linear: 2 FLOPs per multiply-accumulate (MAC).
    ``fwd = 2*MACs``, ``bwd_input = 2*MACs`` (dX = dY * W^T), ``bwd_weight = 2*MACs``
    (dW = X^T * dY); a bias adds 1 FLOP per output element to ``fwd`` (add) and to
    ``bwd_weight`` (reduction of dY).
  * batchnorm (training mode), per element: fwd 4 (subtract mean, divide by std, scale,
    shift; the statistics reductions are folded in), bwd_input 4, bwd_weight 2 (dgamma, dbeta).
  * activation (ReLU, ReLU6, dropout), per element: fwd 1, bwd_input 1.
  * add: fwd 1 per output element; backward 0 (the gradient fans out unchanged).
  * concat, shuffle: 0 FLOPs (pure data movement, their cost is all bytes).
  * max pool: fwd k*k comparisons per output element, bwd_input 1 per output (scatter);
    avg pool: k*k per output element both ways; adaptive avg pool: the exact region sizes.
  * Layers without parameters have ``bwd_weight_flops == 0``.
  * The first layer of a model reads the data, whose gradient is never needed: its
    ``bwd_input_flops`` is 0 and its ``bwd_bytes`` omit dX (and the weight read for dX).

Bytes (fp32: every tensor, including dropout masks and max-pool argmax indices, is counted
at 4 bytes per element, so the figures are an upper bound on traffic, without cache reuse)
  * ``fwd_bytes`` = read inputs + read weights + write outputs.
  * ``bwd_bytes`` = read dY + read the tensor saved for backward (the input for
    conv/linear/batchnorm/activation, the argmax for max pool, nothing for add/concat/
    shuffle/avg pool) + write dW + (read W and write dX unless this is the first layer).
"""
from __future__ import annotations

import math
import operator
from dataclasses import asdict, dataclass
from typing import Sequence

from swansim.errors import InputError

OPS = frozenset({"conv", "depthwise", "pointwise", "linear", "pool", "batchnorm",
                 "activation", "shuffle", "add", "concat"})
MAC_OPS = frozenset({"conv", "depthwise", "pointwise", "linear"})
BYTES_PER_ELEMENT = 4  # fp32

Shape = tuple[int, int, int]


@dataclass(frozen=True)
class Layer:
    """One op of a network with its costs for a whole mini-batch (see module docstring)."""

    name: str
    op: str
    params: int            # trainable parameters, incl. bias and BN affine
    macs: int              # multiply-accumulates in forward (0 outside conv/linear)
    fwd_flops: int
    bwd_input_flops: int
    bwd_weight_flops: int
    fwd_bytes: int
    bwd_bytes: int
    out_shape: Shape       # (C, H, W) of one sample; linear layers give (features, 1, 1)
    in_channels: int       # total over all inputs (concat, add); in_features for linear
    out_channels: int
    kernel: int            # square kernel side; 1 for non-spatial ops
    stride: int
    groups: int            # conv groups; shuffle groups; 1 otherwise
    out_hw: tuple[int, int]
    batch: int

    def __post_init__(self):
        if self.op not in OPS:
            raise ValueError(f"unknown op {self.op!r}; expected one of {sorted(OPS)}")

    @property
    def out_bytes(self) -> int:
        """Size of the output activations of the whole batch (what backward keeps alive)."""
        return self.batch * math.prod(self.out_shape) * BYTES_PER_ELEMENT


@dataclass(frozen=True)
class Model:
    """A network as its layers in forward order, for a given batch and input shape."""

    name: str
    layers: tuple[Layer, ...]
    batch: int
    input_shape: Shape
    num_classes: int

    @property
    def params(self) -> int:
        return sum(layer.params for layer in self.layers)

    @property
    def macs_per_sample(self) -> int:
        """Forward MACs of the conv and linear layers for one sample (the usual 'FLOPs' of papers)."""
        return sum(layer.macs for layer in self.layers if layer.op in MAC_OPS) // self.batch

    @property
    def fwd_flops(self) -> int:
        return sum(layer.fwd_flops for layer in self.layers)

    @property
    def train_flops(self) -> int:
        """Forward plus backward (input and weight gradients) FLOPs of one training step."""
        return sum(layer.fwd_flops + layer.bwd_input_flops + layer.bwd_weight_flops
                   for layer in self.layers)

    def to_frame(self):
        """One tidy row per layer; tuple shapes are split into scalar columns."""
        import pandas as pd

        rows = []
        for layer in self.layers:
            row = asdict(layer)
            del row["out_shape"], row["out_hw"]
            row["out_c"], row["out_h"], row["out_w"] = layer.out_shape
            rows.append(row)
        return pd.DataFrame(rows)


def positive_int(value, file: str, field: str) -> int:
    """``value`` as an int >= 1, else an InputError naming ``file`` and ``field``."""
    try:
        if isinstance(value, bool):
            raise TypeError
        number = operator.index(value)
    except TypeError:
        raise InputError(file=file, field=field, reason=f"must be an integer, got {value!r}") from None
    if number < 1:
        raise InputError(file=file, field=field, reason=f"must be >= 1, got {number}")
    return number


def _adaptive_regions(size: int, out: int) -> list[int]:
    """Region lengths PyTorch's adaptive pooling uses along one axis."""
    return [-(-(i + 1) * size // out) - (i * size // out) for i in range(out)]


class GraphBuilder:
    """Appends layers in forward order while tracking the current activation shape.

    ``shape`` is the current (C, H, W); branches (residuals, fire modules, shuffle units)
    save it, build one path, then set it back before building the other.
    """

    def __init__(self, model: str, batch: int, input_shape: Sequence[int]):
        self.model = model
        self.batch = positive_int(batch, model, "batch")
        if isinstance(input_shape, (str, bytes)) or len(tuple(input_shape)) != 3:
            raise InputError(file=model, field="input_shape",
                             reason=f"must be (channels, height, width), got {input_shape!r}")
        self.input_shape: Shape = tuple(positive_int(v, model, "input_shape") for v in input_shape)
        self.shape: Shape = self.input_shape
        self.layers: list[Layer] = []

    def build(self, num_classes: int) -> Model:
        return Model(self.model, tuple(self.layers), self.batch, self.input_shape, num_classes)

    # -- core -------------------------------------------------------------------------
    def _elems(self, shape: Shape) -> int:
        return self.batch * math.prod(shape)

    def _append(self, name: str, op: str, out: Shape, *, in_elems: int, in_channels: int,
                params: int = 0, macs: int = 0, fwd: int = 0, bwd_input: int = 0,
                bwd_weight: int = 0, saved: int = 0, kernel: int = 1, stride: int = 1,
                groups: int = 1) -> Shape:
        need_dx = bool(self.layers)  # the data input needs no gradient
        n_out = self._elems(out)
        bwd_bytes = n_out + saved + params + (params + in_elems if need_dx else 0)
        self.layers.append(Layer(
            name=name, op=op, params=params, macs=macs, fwd_flops=fwd,
            bwd_input_flops=bwd_input if need_dx else 0, bwd_weight_flops=bwd_weight,
            fwd_bytes=BYTES_PER_ELEMENT * (in_elems + params + n_out),
            bwd_bytes=BYTES_PER_ELEMENT * bwd_bytes,
            out_shape=out, in_channels=in_channels, out_channels=out[0], kernel=kernel,
            stride=stride, groups=groups, out_hw=(out[1], out[2]), batch=self.batch))
        self.shape = out
        return out

    def _window_out(self, name: str, kernel: int, stride: int, padding: int,
                    ceil_mode: bool = False) -> tuple[int, int]:
        """Output H, W of a conv or pool window, as torch.nn computes them (dilation 1)."""
        sizes = []
        for size in self.shape[1:]:
            span = size + 2 * padding - kernel
            out = (-(-span // stride) if ceil_mode else span // stride) + 1
            if ceil_mode and (out - 1) * stride >= size + padding:
                out -= 1  # the last window must start inside the input or left padding
            if out < 1:
                h, w = self.input_shape[1:]
                raise InputError(file=self.model, field="input_shape",
                                 reason=f"{h}x{w} input is too small: layer {name} gets a "
                                        f"{self.shape[1]}x{self.shape[2]} map and kernel {kernel}")
            sizes.append(out)
        return sizes[0], sizes[1]

    # -- ops --------------------------------------------------------------------------
    def conv(self, name: str, out_channels: int, kernel: int, stride: int = 1,
             padding: int = 0, groups: int = 1, bias: bool = False) -> Shape:
        c = self.shape[0]
        assert c % groups == 0 and out_channels % groups == 0, (name, c, out_channels, groups)
        out = (out_channels, *self._window_out(name, kernel, stride, padding))
        n_out = self._elems(out)
        macs = n_out * (c // groups) * kernel * kernel
        bias_flops = n_out if bias else 0
        if groups == c and groups > 1:
            op = "depthwise"
        elif kernel == 1 and groups == 1:
            op = "pointwise"
        else:
            op = "conv"
        return self._append(
            name, op, out, in_elems=self._elems(self.shape), in_channels=c,
            params=out_channels * (c // groups) * kernel * kernel + (out_channels if bias else 0),
            macs=macs, fwd=2 * macs + bias_flops, bwd_input=2 * macs,
            bwd_weight=2 * macs + bias_flops, saved=self._elems(self.shape),
            kernel=kernel, stride=stride, groups=groups)

    def linear(self, name: str, out_features: int, bias: bool = True) -> Shape:
        """Fully connected layer on the flattened activation (the flatten itself is free)."""
        in_features = math.prod(self.shape)
        n_in = self._elems(self.shape)
        macs = n_in * out_features
        bias_flops = self.batch * out_features if bias else 0
        return self._append(
            name, "linear", (out_features, 1, 1), in_elems=n_in, in_channels=in_features,
            params=in_features * out_features + (out_features if bias else 0), macs=macs,
            fwd=2 * macs + bias_flops, bwd_input=2 * macs, bwd_weight=2 * macs + bias_flops,
            saved=n_in)

    def batchnorm(self, name: str) -> Shape:
        n = self._elems(self.shape)
        return self._append(name, "batchnorm", self.shape, in_elems=n, in_channels=self.shape[0],
                            params=2 * self.shape[0], fwd=4 * n, bwd_input=4 * n,
                            bwd_weight=2 * n, saved=n)

    def activation(self, name: str) -> Shape:
        """ReLU, ReLU6 or dropout: one FLOP per element each way."""
        n = self._elems(self.shape)
        return self._append(name, "activation", self.shape, in_elems=n,
                            in_channels=self.shape[0], fwd=n, bwd_input=n, saved=n)

    def pool(self, name: str, kernel: int, stride: int, padding: int = 0,
             ceil_mode: bool = False, kind: str = "max") -> Shape:
        out = (self.shape[0], *self._window_out(name, kernel, stride, padding, ceil_mode))
        n_out = self._elems(out)
        window = n_out * kernel * kernel
        is_max = kind == "max"
        return self._append(name, "pool", out, in_elems=self._elems(self.shape),
                            in_channels=self.shape[0], fwd=window,
                            bwd_input=n_out if is_max else window,
                            saved=n_out if is_max else 0, kernel=kernel, stride=stride)

    def adaptive_avg_pool(self, name: str, out_hw: tuple[int, int] = (1, 1)) -> Shape:
        c, h, w = self.shape
        rows, cols = _adaptive_regions(h, out_hw[0]), _adaptive_regions(w, out_hw[1])
        adds = self.batch * c * sum(rows) * sum(cols)
        # kernel/stride are the nominal (largest region, floor ratio) values of a square window
        return self._append(name, "pool", (c, *out_hw), in_elems=self._elems(self.shape),
                            in_channels=c, fwd=adds, bwd_input=adds,
                            kernel=max(rows + cols), stride=max(1, h // out_hw[0]))

    def add(self, name: str, inputs: Sequence[Shape]) -> Shape:
        """Elementwise sum of same-shape tensors (residual connection)."""
        assert all(s == inputs[0] for s in inputs), (name, inputs)
        n_out = self._elems(inputs[0])
        return self._append(name, "add", inputs[0], in_elems=n_out * len(inputs),
                            in_channels=inputs[0][0], fwd=n_out * (len(inputs) - 1))

    def concat(self, name: str, inputs: Sequence[Shape]) -> Shape:
        """Channel concatenation of tensors with equal H, W."""
        assert all(s[1:] == inputs[0][1:] for s in inputs), (name, inputs)
        channels = sum(s[0] for s in inputs)
        out = (channels, *inputs[0][1:])
        return self._append(name, "concat", out, in_elems=self._elems(out), in_channels=channels)

    def shuffle(self, name: str, groups: int) -> Shape:
        """Channel shuffle (ShuffleNet): a permutation of channels, bytes only."""
        n = self._elems(self.shape)
        return self._append(name, "shuffle", self.shape, in_elems=n, in_channels=self.shape[0],
                            groups=groups)

    # -- composites -------------------------------------------------------------------
    def conv_bn_act(self, prefix: str, out_channels: int, kernel: int, stride: int = 1,
                    groups: int = 1, act: str | None = "relu", tag: str = "") -> Shape:
        """conv (no bias, 'same'-style padding (k-1)//2) -> batchnorm -> optional activation.

        Layers are named ``{prefix}.conv{tag}``, ``{prefix}.bn{tag}``, ``{prefix}.{act}{tag}``.
        """
        dot = f"{prefix}." if prefix else ""
        self.conv(f"{dot}conv{tag}", out_channels, kernel, stride, (kernel - 1) // 2, groups)
        self.batchnorm(f"{dot}bn{tag}")
        if act:
            self.activation(f"{dot}{act}{tag}")
        return self.shape
