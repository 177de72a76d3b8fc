"""The model zoo: torchvision architectures rebuilt from layer shapes, plus a registry.

Each builder takes ``(batch=1, input_shape=(3, 224, 224), num_classes=1000)`` and returns a
``Model``. Architectures follow torchvision exactly (so 1000-class parameter counts match it to
the unit); MobileNet v1 is not in torchvision and follows the common Keras/TF implementation.
Layer names mirror torchvision's module paths where that stays simple.
"""
from __future__ import annotations

import itertools
from typing import Callable, Sequence

from swansim.dnn.graph import GraphBuilder, Model, positive_int
from swansim.registry import Registry

DEFAULT_INPUT = (3, 224, 224)


def _start(name: str, batch, input_shape, num_classes) -> GraphBuilder:
    builder = GraphBuilder(name, batch, input_shape)
    positive_int(num_classes, name, "num_classes")
    return builder


def _names(prefix: str) -> Callable[[], str]:
    """torchvision-style numbering for nn.Sequential children: prefix.0, prefix.1, ..."""
    return (f"{prefix}.{i}" for i in itertools.count()).__next__


# -- ResNet -----------------------------------------------------------------------------
def _basic_block(b: GraphBuilder, p: str, planes: int, stride: int) -> None:
    x = b.shape
    b.conv_bn_act(p, planes, 3, stride, tag="1")
    y = b.conv_bn_act(p, planes, 3, act=None, tag="2")
    _residual(b, p, x, y, planes, stride)


def _bottleneck(b: GraphBuilder, p: str, planes: int, stride: int) -> None:
    x = b.shape
    b.conv_bn_act(p, planes, 1, tag="1")
    b.conv_bn_act(p, planes, 3, stride, tag="2")  # stride on the 3x3 (torchvision "v1.5")
    y = b.conv_bn_act(p, planes * 4, 1, act=None, tag="3")
    _residual(b, p, x, y, planes * 4, stride)


def _residual(b: GraphBuilder, p: str, x, y, out_channels: int, stride: int) -> None:
    if stride != 1 or x[0] != out_channels:
        b.shape = x
        x = b.conv_bn_act(f"{p}.downsample", out_channels, 1, stride, act=None)
    b.add(f"{p}.add", [y, x])
    b.activation(f"{p}.relu")


def _resnet(name, block, counts, batch, input_shape, num_classes) -> Model:
    b = _start(name, batch, input_shape, num_classes)
    b.conv_bn_act("", 64, 7, 2, tag="1")
    b.pool("maxpool", 3, 2, 1)
    for stage, (planes, count) in enumerate(zip((64, 128, 256, 512), counts), start=1):
        for i in range(count):
            block(b, f"layer{stage}.{i}", planes, 2 if stage > 1 and i == 0 else 1)
    b.adaptive_avg_pool("avgpool")
    b.linear("fc", num_classes)
    return b.build(num_classes)


def resnet18(batch=1, input_shape=DEFAULT_INPUT, num_classes=1000) -> Model:
    return _resnet("resnet18", _basic_block, (2, 2, 2, 2), batch, input_shape, num_classes)


def resnet34(batch=1, input_shape=DEFAULT_INPUT, num_classes=1000) -> Model:
    return _resnet("resnet34", _basic_block, (3, 4, 6, 3), batch, input_shape, num_classes)


def resnet50(batch=1, input_shape=DEFAULT_INPUT, num_classes=1000) -> Model:
    return _resnet("resnet50", _bottleneck, (3, 4, 6, 3), batch, input_shape, num_classes)


# -- MobileNets -------------------------------------------------------------------------
def mobilenet_v2(batch=1, input_shape=DEFAULT_INPUT, num_classes=1000) -> Model:
    b = _start("mobilenet_v2", batch, input_shape, num_classes)
    b.conv_bn_act("features.0", 32, 3, 2, act="relu6")
    index = 1
    # (expansion t, out channels c, repeats n, first stride s), torchvision width 1.0
    for t, c, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                       (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)):
        for i in range(n):
            p, x, stride = f"features.{index}", b.shape, s if i == 0 else 1
            hidden = round(x[0] * t)
            if t != 1:
                b.conv_bn_act(f"{p}.expand", hidden, 1, act="relu6")
            b.conv_bn_act(f"{p}.dw", hidden, 3, stride, groups=hidden, act="relu6")
            y = b.conv_bn_act(f"{p}.project", c, 1, act=None)
            if stride == 1 and x[0] == c:
                b.add(f"{p}.add", [x, y])
            index += 1
    b.conv_bn_act(f"features.{index}", 1280, 1, act="relu6")
    b.adaptive_avg_pool("avgpool")
    b.activation("classifier.0")  # Dropout(0.2)
    b.linear("classifier.1", num_classes)
    return b.build(num_classes)


def mobilenet(batch=1, input_shape=DEFAULT_INPUT, num_classes=1000) -> Model:
    """MobileNet v1, width 1.0 (Howard et al. 2017); not in torchvision.

    Assumption (common implementations, Keras ``applications.MobileNet``): convs without
    bias, BN with affine params, ReLU6, a biased 1x1 classifier (modelled as the equivalent
    linear layer). 1000 classes: 4,231,976 trainable parameters. Stride-2 convs use PyTorch
    padding 1, which matches Keras' asymmetric padding in output size for even inputs.
    """
    b = _start("mobilenet", batch, input_shape, num_classes)
    b.conv_bn_act("conv1", 32, 3, 2, act="relu6")
    blocks = ((64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2),
              *[(512, 1)] * 5, (1024, 2), (1024, 1))
    for i, (c, stride) in enumerate(blocks, start=1):
        b.conv_bn_act(f"block{i}.dw", b.shape[0], 3, stride, groups=b.shape[0], act="relu6")
        b.conv_bn_act(f"block{i}.pw", c, 1, act="relu6")
    b.adaptive_avg_pool("avgpool")
    b.activation("dropout")
    b.linear("fc", num_classes)
    return b.build(num_classes)


# -- ShuffleNet v2 ----------------------------------------------------------------------
def _shuffle_unit(b: GraphBuilder, p: str, out_channels: int, stride: int) -> None:
    x, half = b.shape, out_channels // 2
    if stride > 1:
        b.conv_bn_act(f"{p}.branch1.dw", x[0], 3, stride, groups=x[0], act=None)
        left = b.conv_bn_act(f"{p}.branch1.pw", half, 1)
        b.shape = x
    else:
        left = b.shape = (half, *x[1:])  # x.chunk(2): the right half feeds branch2, a free view
    b.conv_bn_act(f"{p}.branch2.pw1", half, 1)
    b.conv_bn_act(f"{p}.branch2.dw", half, 3, stride, groups=half, act=None)
    right = b.conv_bn_act(f"{p}.branch2.pw2", half, 1)
    b.concat(f"{p}.concat", [left, right])
    b.shuffle(f"{p}.shuffle", groups=2)


def _shufflenet_v2(name, widths, batch, input_shape, num_classes) -> Model:
    b = _start(name, batch, input_shape, num_classes)
    b.conv_bn_act("conv1", widths[0], 3, 2)
    b.pool("maxpool", 3, 2, 1)
    for stage, (repeats, width) in enumerate(zip((4, 8, 4), widths[1:4]), start=2):
        for i in range(repeats):
            _shuffle_unit(b, f"stage{stage}.{i}", width, 2 if i == 0 else 1)
    b.conv_bn_act("conv5", widths[4], 1)
    b.adaptive_avg_pool("globalpool")  # x.mean([2, 3])
    b.linear("fc", num_classes)
    return b.build(num_classes)


def shufflenet_v2_x1_0(batch=1, input_shape=DEFAULT_INPUT, num_classes=1000) -> Model:
    return _shufflenet_v2("shufflenet_v2_x1_0", (24, 116, 232, 464, 1024),
                          batch, input_shape, num_classes)


def shufflenet_v2_x2_0(batch=1, input_shape=DEFAULT_INPUT, num_classes=1000) -> Model:
    return _shufflenet_v2("shufflenet_v2_x2_0", (24, 244, 488, 976, 2048),
                          batch, input_shape, num_classes)


# -- SqueezeNet, AlexNet, VGG -----------------------------------------------------------
def _fire(b: GraphBuilder, p: str, squeeze: int, expand: int) -> None:
    b.conv(f"{p}.squeeze", squeeze, 1, bias=True)
    x = b.activation(f"{p}.squeeze_activation")
    b.conv(f"{p}.expand1x1", expand, 1, bias=True)
    left = b.activation(f"{p}.expand1x1_activation")
    b.shape = x
    b.conv(f"{p}.expand3x3", expand, 3, padding=1, bias=True)
    right = b.activation(f"{p}.expand3x3_activation")
    b.concat(f"{p}.concat", [left, right])


def squeezenet1_1(batch=1, input_shape=DEFAULT_INPUT, num_classes=1000) -> Model:
    b = _start("squeezenet1_1", batch, input_shape, num_classes)
    n = _names("features")
    b.conv(n(), 64, 3, 2, bias=True)
    b.activation(n())
    for item in ("M", (16, 64), (16, 64), "M", (32, 128), (32, 128), "M",
                 (48, 192), (48, 192), (64, 256), (64, 256)):
        if item == "M":
            b.pool(n(), 3, 2, ceil_mode=True)
        else:
            _fire(b, n(), *item)
    n = _names("classifier")
    b.activation(n())  # Dropout(0.5)
    b.conv(n(), num_classes, 1, bias=True)  # the classifier is a 1x1 conv, then ReLU
    b.activation(n())
    b.adaptive_avg_pool(n())
    return b.build(num_classes)


def _classifier(b: GraphBuilder, num_classes: int, dropout_first: bool) -> None:
    """The 4096-4096-classes MLP of AlexNet (dropout before linears) and VGG (after ReLUs)."""
    n = _names("classifier")
    for _ in range(2):
        if dropout_first:
            b.activation(n())
        b.linear(n(), 4096)
        b.activation(n())
        if not dropout_first:
            b.activation(n())
    b.linear(n(), num_classes)


def alexnet(batch=1, input_shape=DEFAULT_INPUT, num_classes=1000) -> Model:
    b = _start("alexnet", batch, input_shape, num_classes)
    n = _names("features")
    for out, kernel, stride, padding, pool in ((64, 11, 4, 2, True), (192, 5, 1, 2, True),
                                               (384, 3, 1, 1, False), (256, 3, 1, 1, False),
                                               (256, 3, 1, 1, True)):
        b.conv(n(), out, kernel, stride, padding, bias=True)
        b.activation(n())
        if pool:
            b.pool(n(), 3, 2)
    b.adaptive_avg_pool("avgpool", (6, 6))
    _classifier(b, num_classes, dropout_first=True)
    return b.build(num_classes)


def vgg16(batch=1, input_shape=DEFAULT_INPUT, num_classes=1000) -> Model:
    """VGG-16 (configuration D) without batchnorm."""
    b = _start("vgg16", batch, input_shape, num_classes)
    n = _names("features")
    for item in (64, 64, "M", 128, 128, "M", 256, 256, 256, "M",
                 512, 512, 512, "M", 512, 512, 512, "M"):
        if item == "M":
            b.pool(n(), 2, 2)
        else:
            b.conv(n(), item, 3, padding=1, bias=True)
            b.activation(n())
    b.adaptive_avg_pool("avgpool", (7, 7))
    _classifier(b, num_classes, dropout_first=False)
    return b.build(num_classes)


# -- registry ---------------------------------------------------------------------------
MODELS: Registry[Callable[..., Model]] = Registry("model")
for _f in (resnet18, resnet34, resnet50, mobilenet, mobilenet_v2, shufflenet_v2_x1_0, shufflenet_v2_x2_0,
           squeezenet1_1, alexnet, vgg16):
    MODELS.register(_f.__name__, _f)


def build_model(name: str, batch: int = 1, input_shape: Sequence[int] = DEFAULT_INPUT,
                num_classes: int = 1000) -> Model:
    """Build a zoo model by name; an unknown name is an InputError listing the valid ones."""
    return MODELS.get(name, "model")(batch=batch, input_shape=input_shape, num_classes=num_classes)
