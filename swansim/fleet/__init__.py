"""Federated learning at fleet scale: population, availability, the energy loan, FedAvg rounds.

Local training cost is not computed here: a :data:`~swansim.fleet.rounds.CostFactory` hands in
one :class:`~swansim.fleet.rounds.LocalCost` per model and policy. The entry point is
:func:`~swansim.fleet.run.run_fleet`. Names are imported on first use.
"""
_API = {
    "ClientState": "swansim.fleet.availability", "Timeline": "swansim.fleet.availability",
    "Client": "swansim.fleet.population", "Population": "swansim.fleet.population",
    "CostFactory": "swansim.fleet.rounds", "LocalCost": "swansim.fleet.rounds",
    "LocalOutcome": "swansim.fleet.rounds", "LocalRequest": "swansim.fleet.rounds",
    "FleetConfig": "swansim.fleet.run", "FleetResult": "swansim.fleet.run", "run_fleet": "swansim.fleet.run",
}


def __getattr__(name: str):
    if name in _API:
        import importlib

        value = getattr(importlib.import_module(_API[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'swansim.fleet' has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_API])
