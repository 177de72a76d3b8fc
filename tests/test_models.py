"""Model zoo: torchvision-exact parameter counts, MACs, and cost-scaling invariants."""
import pytest
from hypothesis import given, settings, strategies as st

from swansim.dnn.graph import MAC_OPS, OPS
from swansim.dnn.models import MODELS, build_model
from swansim.errors import InputError

# torchvision parameter counts (1000 classes); mobilenet v1 from Keras (trainable params)
PARAMS = {
    "resnet18": 11_689_512, "resnet34": 21_797_672, "resnet50": 25_557_032,
    "mobilenet_v2": 3_504_872, "shufflenet_v2_x1_0": 2_278_604,
    "shufflenet_v2_x2_0": 7_393_996, "squeezenet1_1": 1_235_496, "alexnet": 61_100_840,
    "vgg16": 138_357_544, "mobilenet": 4_231_976,
}
# forward MACs per 224x224 sample, torchvision's reported "GFLOPS" (Keras paper for v1)
MACS = {
    "resnet18": 1.81e9, "resnet34": 3.66e9, "resnet50": 4.09e9, "mobilenet_v2": 0.30e9,
    "shufflenet_v2_x1_0": 0.14e9, "shufflenet_v2_x2_0": 0.58e9, "squeezenet1_1": 0.35e9,
    "alexnet": 0.71e9, "vgg16": 15.5e9, "mobilenet": 0.569e9,
}
# in_features of the classifier, to predict how num_classes changes the parameter count
CLASSIFIER_IN = {
    "resnet18": 512, "resnet34": 512, "resnet50": 2048, "mobilenet_v2": 1280,
    "shufflenet_v2_x1_0": 1024, "shufflenet_v2_x2_0": 2048, "squeezenet1_1": 512,
    "alexnet": 4096, "vgg16": 4096, "mobilenet": 1024,
}
NAMES = sorted(MODELS)
FAST = settings(max_examples=15, deadline=None)


def test_zoo_is_complete():
    assert set(MODELS) == set(PARAMS)


@pytest.mark.parametrize("name", NAMES)
def test_param_counts_match_torchvision(name):
    assert build_model(name).params == PARAMS[name]


@pytest.mark.parametrize("name", NAMES)
def test_macs_within_5_percent(name):
    assert build_model(name).macs_per_sample == pytest.approx(MACS[name], rel=0.05)


@pytest.mark.parametrize("name", NAMES)
def test_layers_are_well_formed(name):
    model = build_model(name, batch=2)
    names = [layer.name for layer in model.layers]
    assert len(names) == len(set(names))
    assert model.layers[-1].out_shape == (1000, 1, 1)
    for layer in model.layers:
        assert layer.op in OPS and layer.batch == 2
        assert layer.out_shape == (layer.out_channels, *layer.out_hw)
        assert min(layer.fwd_flops, layer.bwd_input_flops, layer.bwd_weight_flops) >= 0
        assert layer.fwd_bytes > 0 and layer.bwd_bytes > 0
        if layer.params == 0:
            assert layer.bwd_weight_flops == 0
        if layer.op not in MAC_OPS:
            assert layer.macs == 0


@given(name=st.sampled_from(NAMES), batch=st.integers(1, 64))
@FAST
def test_flops_scale_linearly_with_batch(name, batch):
    one, many = build_model(name), build_model(name, batch=batch)
    assert many.fwd_flops == batch * one.fwd_flops
    assert many.train_flops == batch * one.train_flops
    assert many.macs_per_sample == one.macs_per_sample
    for a, b in zip(one.layers, many.layers):
        assert (b.fwd_flops, b.bwd_input_flops, b.bwd_weight_flops) == (
            batch * a.fwd_flops, batch * a.bwd_input_flops, batch * a.bwd_weight_flops)
        # activations scale with batch, weights do not
        assert b.fwd_bytes - 4 * b.params == batch * (a.fwd_bytes - 4 * a.params)


@given(name=st.sampled_from(NAMES), batch=st.integers(1, 16), channels=st.integers(1, 4),
       height=st.integers(64, 256), width=st.integers(64, 256))
@FAST
def test_params_independent_of_batch_and_input_size(name, batch, channels, height, width):
    # only the first conv sees the input channels
    base = build_model(name, input_shape=(channels, 224, 224))
    model = build_model(name, batch=batch, input_shape=(channels, height, width))
    assert model.params == base.params
    if channels == 3:
        assert model.params == PARAMS[name]


@given(name=st.sampled_from(NAMES), num_classes=st.integers(1, 5000))
@FAST
def test_num_classes_changes_only_the_classifier(name, num_classes):
    base, model = build_model(name), build_model(name, num_classes=num_classes)
    assert model.params - base.params == (num_classes - 1000) * (CLASSIFIER_IN[name] + 1)
    last = max(i for i, layer in enumerate(base.layers) if layer.params)
    assert [l.params for l in model.layers[:last]] == [l.params for l in base.layers[:last]]
    assert model.layers[-1].out_shape == (num_classes, 1, 1)


@pytest.mark.parametrize("name", NAMES)
def test_conv_ops_are_classified_by_groups_and_kernel(name):
    for layer in build_model(name).layers:
        if layer.op == "depthwise":
            assert layer.groups == layer.in_channels > 1
        elif layer.op == "pointwise":
            assert layer.kernel == 1 and layer.groups == 1
        elif layer.op == "conv":
            assert layer.groups != layer.in_channels or layer.groups == 1
            assert layer.kernel > 1 or layer.groups > 1


@pytest.mark.parametrize("name, depthwise, pointwise", [
    ("mobilenet_v2", 17, 34),        # one dw per block; 16 expand + 17 project + last 1x1
    ("shufflenet_v2_x1_0", 19, 36),  # 3 stride-2 units with 2 dw, 13 stride-1 units with 1
    ("shufflenet_v2_x2_0", 19, 36),
    ("mobilenet", 13, 13),
    ("resnet50", 0, 36),
])
def test_depthwise_and_pointwise_counts(name, depthwise, pointwise):
    ops = [layer.op for layer in build_model(name).layers]
    assert ops.count("depthwise") == depthwise
    assert ops.count("pointwise") == pointwise
    for layer in build_model(name).layers:
        if layer.op == "depthwise":
            assert layer.kernel == 3


@pytest.mark.parametrize("name", NAMES)
def test_backward_is_about_twice_forward_for_conv_and_linear(name):
    layers = [layer for layer in build_model(name, batch=4).layers if layer.op in MAC_OPS]
    first, rest = layers[0], layers[1:]
    # the data input needs no gradient
    assert first.bwd_input_flops == 0
    assert first.bwd_weight_flops == pytest.approx(first.fwd_flops, rel=0.01)
    for layer in rest:
        backward = layer.bwd_input_flops + layer.bwd_weight_flops
        # bias adds 1 FLOP per output: worst case SqueezeNet's 16-input 1x1 convs, 1.5% off
        assert backward == pytest.approx(2 * layer.fwd_flops, rel=0.02)
        assert layer.fwd_flops == pytest.approx(2 * layer.macs, rel=0.04)
        assert layer.bwd_input_flops == 2 * layer.macs
        assert layer.bwd_weight_flops == layer.fwd_flops


@pytest.mark.parametrize("name", sorted(set(NAMES) - {"alexnet"}))
def test_small_spectrogram_input(name):
    model = build_model(name, batch=8, input_shape=(1, 32, 32), num_classes=35)
    assert model.layers[-1].out_shape == (35, 1, 1)
    assert 0 < model.macs_per_sample < MACS[name]


def test_too_small_input_is_input_error():
    # AlexNet's third max pool would get a 1x1 map, as PyTorch refuses too
    with pytest.raises(InputError) as err:
        build_model("alexnet", input_shape=(1, 32, 32))
    assert err.value.where == "alexnet" and err.value.field == "input_shape"
    assert build_model("alexnet", input_shape=(3, 63, 63)).params == PARAMS["alexnet"]
    with pytest.raises(InputError):
        build_model("alexnet", input_shape=(3, 62, 62))


def test_pytorch_spatial_arithmetic():
    # 224 -> 7x7 before ResNet's pool; SqueezeNet's pools use ceil_mode (floor would give 1x1)
    resnet = {l.name: l for l in build_model("resnet18").layers}
    assert resnet["layer4.1.relu"].out_hw == (7, 7)
    squeeze = {l.name: l for l in build_model("squeezenet1_1", input_shape=(3, 34, 34)).layers}
    assert squeeze["classifier.1"].out_hw == (2, 2)
    assert {l.name: l for l in build_model("squeezenet1_1").layers}["classifier.1"].out_hw == (13, 13)


@pytest.mark.parametrize("kwargs, field", [
    ({"batch": 0}, "batch"), ({"batch": 1.5}, "batch"), ({"num_classes": 0}, "num_classes"),
    ({"input_shape": (224, 224)}, "input_shape"), ({"input_shape": (3, 0, 224)}, "input_shape"),
])
def test_bad_arguments_are_input_errors(kwargs, field):
    with pytest.raises(InputError) as err:
        build_model("resnet18", **kwargs)
    assert err.value.field == field


def test_unknown_model_is_input_error_naming_choices():
    with pytest.raises(InputError) as err:
        build_model("resnet19")
    assert err.value.where == "model"
    assert "resnet19" in str(err.value) and "resnet18" in str(err.value)
    assert all(name in err.value.reason for name in MODELS)


def test_to_frame_has_one_tidy_row_per_layer():
    model = build_model("mobilenet_v2", batch=4)
    frame = model.to_frame()
    assert len(frame) == len(model.layers)
    for column in ("name", "op", "params", "fwd_flops", "bwd_input_flops", "bwd_weight_flops",
                   "fwd_bytes", "bwd_bytes", "out_c", "out_h", "out_w", "in_channels",
                   "kernel", "stride", "groups", "batch"):
        assert column in frame.columns
    assert frame["params"].sum() == model.params
    assert frame["fwd_flops"].sum() == model.fwd_flops
    assert (frame[["fwd_flops", "bwd_input_flops", "bwd_weight_flops"]].sum().sum()
            == model.train_flops)
