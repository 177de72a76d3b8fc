"""Who decides where training runs: Swan, per-layer Swan and the baselines.

`base.Policy` is the interface (`admit`, `plan`, `observe`), `view` holds the only records a
policy sees, `make_policy(name)` builds one by name (`policy_names()` lists them).
"""
from swansim.policies.base import Decision, Policy, make_policy, policy_class, policy_names
from swansim.policies.view import BatchStats, LayerStat, ModelInfo, PhoneState, PolicyView

__all__ = ["BatchStats", "Decision", "LayerStat", "ModelInfo", "PhoneState", "Policy", "PolicyView",
           "make_policy", "policy_class", "policy_names"]
