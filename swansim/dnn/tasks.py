"""The Swan paper's training tasks: the one place that says what each workload is.

The paper trains ResNet-34 on Google Speech (35 classes) and MobileNetV2 and ShuffleNetV2-x2 on
OpenImage (600 classes), batch 16 (section 6). It states no input sizes; those below are
assumptions, argued in DESIGN.md ("Workload"):
  * ResNet-34: 1x32x32 log-mel spectrograms (FedScale-style 32 mel bands x 32 frames).
  * ShuffleNetV2-x2: 3x112x112. 3x224x224 (torchvision's standard, FedScale's OpenImage crop)
    was preferred and tried first: there PyTorch 1.8's per-group gradient passes dominate the
    batch and the paper's Fig. 2b ordering cannot come out; 112 also keeps the ~0.4 GB PyTorch
    holds for backward at batch 16 far from the ~1.6 GB at 224 on a 4 GB phone.
  * MobileNetV2: the same OpenImage crops as ShuffleNetV2.
The paper's fleet ran these tasks in FedScale; a client's local work per round is FedScale's
benchmark configuration for the dataset (``local_steps``: benchmark/configs/openimage/openimage.yml
20, benchmark/configs/speech/google_speech.yml 30), at the paper's batch 16 (an assumption: the
paper gives no batch for its fleet; FedScale's configs use 20). How many rounds it ran
(``paper_rounds``) is read off its figures' round axes (arXiv 2206.04687 v1, Figs. 5b and 6b:
0-2,000 for ShuffleNetV2 and MobileNetV2; Fig. 7b: 0-400 for ResNet-34); the text gives no count.
Every path (landscape, ux, demo, calibration, policies, fleet) builds its graphs here.
"""
from __future__ import annotations

from dataclasses import dataclass

from swansim.dnn.graph import Model
from swansim.dnn.models import DEFAULT_INPUT, build_model

SWAN_BATCH = 16


@dataclass(frozen=True)
class Task:
    """A model with the input size and class count it trains at."""

    model: str
    input_shape: tuple[int, int, int]
    num_classes: int
    fl_local_steps: int = 20   # mini-batches per federated round (FedScale's config for the dataset)
    paper_rounds: int = 0      # rounds of the paper's fleet run (its figures' round axes; 0: not in the paper)


SWAN_TASKS: dict[str, Task] = {
    "resnet34": Task("resnet34", (1, 32, 32), 35, fl_local_steps=30, paper_rounds=400),
    "shufflenet_v2_x2_0": Task("shufflenet_v2_x2_0", (3, 112, 112), 600, fl_local_steps=20, paper_rounds=2000),
    "mobilenet_v2": Task("mobilenet_v2", (3, 112, 112), 600, fl_local_steps=20, paper_rounds=2000),
}
# The two tasks of the paper's Fig. 2 (the calibration figures): 2a ResNet-34, 2b ShuffleNetV2.
FIG2_TASKS = ("resnet34", "shufflenet_v2_x2_0")


def task(model: str) -> Task:
    """The Swan task of ``model``, or torchvision's defaults (3x224x224, 1000 classes)."""
    return SWAN_TASKS.get(model) or Task(model, DEFAULT_INPUT, 1000)


def build_task(model: str, batch: int | None = None, input_shape: tuple[int, int, int] | None = None,
               num_classes: int | None = None, mode: str = "train") -> Model:
    """The graph of ``model`` at its task's input and classes unless given; batch 16 to train,
    1 to infer unless given."""
    t = task(model)
    if batch is None:
        batch = SWAN_BATCH if mode == "train" else 1
    return build_model(model, batch=batch, input_shape=input_shape or t.input_shape,
                       num_classes=t.num_classes if num_classes is None else num_classes)
