"""swansim: a discrete-event simulator of smartphone SoCs training DNNs in the background.

The public API for experiment scripts (tidy pandas DataFrames; `run` returns a RunResult of them)::

    import swansim
    df = swansim.landscape("pixel3", "shufflenet_v2_x2_0")     # every execution choice
    r = swansim.run("pixel3", "resnet34", "swan", duration_s=120)  # r.batches, r.decisions, ...
    df = swansim.compare(["pixel3"], ["resnet34"], ["swan", "pytorch-default"], duration_s=60)
    res = swansim.fleet("resnet34", clients=240, per_round=20, rounds=20, out="results/fleet")
    df = swansim.thermal(devices=["pixel3"], minutes=30)            # throttling under sustained load
    drops, janks = swansim.ux(devices=["pixel3"], models=["resnet34"], light_s=0)
    swansim.profiles(), swansim.policies(), swansim.models()  # what the catalogues hold

Names are imported on first use, so ``import swansim`` stays cheap.
"""
__version__ = "0.1.0"

_API = {
    "landscape": ("swansim.runs.landscape", "landscape_frame"),
    "run": ("swansim.session.phone", "run"),
    "compare": ("swansim.runs.compare", "compare"),
    "fleet": ("swansim.api", "fleet"),
    "thermal": ("swansim.api", "thermal"),
    "ux": ("swansim.api", "ux"),
    "profiles": ("swansim.api", "profiles"),
    "policies": ("swansim.api", "policies"),
    "models": ("swansim.api", "models"),
}


def __getattr__(name: str):
    if name in _API:
        import importlib

        module, attr = _API[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'swansim' has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_API])
