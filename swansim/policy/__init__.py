"""Who decides where training runs: Swan, per-layer Swan and the baselines.

`base.Policy` is the interface, `view` holds the only records a policy sees, `base.POLICIES`
the registry: `make_policy(name)` builds one by name, `policy_names()` lists them. Importing
the package registers its own policies; other packages add theirs through the entry-point
group ``swansim.policies`` (`swansim.registry`).
"""
from swansim.policy.base import POLICIES, Decision, Policy, make_policy, policy_class, policy_names, register
from swansim.policy.view import BatchStats, LayerStat, ModelInfo, PhoneState, PolicyView
# the built-in policies register themselves on import
from swansim.policy import swan  # noqa: F401,E402,I001
from swansim.policy import swan_layer  # noqa: F401,E402
from swansim.policy import baselines  # noqa: F401,E402

__all__ = ["POLICIES", "BatchStats", "Decision", "LayerStat", "ModelInfo", "PhoneState", "Policy", "PolicyView",
           "make_policy", "policy_class", "policy_names", "register"]
