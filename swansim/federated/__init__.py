"""Federated learning at fleet scale: population, availability, the energy loan, FedAvg rounds.

Local training cost is not computed here: a :data:`~swansim.federated.rounds.CostFactory` hands in
one :class:`~swansim.federated.rounds.LocalCost` per model and policy. The entry point is
:func:`~swansim.federated.fleet.run_fleet`. Names are imported on first use.
"""
_API = {
    "ClientState": "swansim.federated.availability", "Timeline": "swansim.federated.availability",
    "Client": "swansim.federated.population", "Population": "swansim.federated.population",
    "CostFactory": "swansim.federated.rounds", "LocalCost": "swansim.federated.rounds",
    "LocalOutcome": "swansim.federated.rounds", "LocalRequest": "swansim.federated.rounds",
    "FleetConfig": "swansim.federated.fleet", "FleetResult": "swansim.federated.fleet", "run_fleet": "swansim.federated.fleet",
}


def __getattr__(name: str):
    if name in _API:
        import importlib

        value = getattr(importlib.import_module(_API[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'swansim.federated' has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_API])
