"""One phone, one policy, one owner: the per-batch step a policy takes, the drivers that run it
(the full simulation and the fast-forward on the batch model), and a run with its owner,
probes and tables. Below the fleet and the experiments, which both call it.
"""
