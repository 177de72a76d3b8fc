"""Federated learning at fleet scale: population, availability, the energy loan, FedAvg rounds.

Local training cost is not computed here: a :data:`~swansim.fleet.rounds.CostFactory` hands in
one :class:`~swansim.fleet.rounds.LocalCost` per model and policy.
"""
from swansim.fleet.availability import ClientState, Timeline
from swansim.fleet.population import Client, Population
from swansim.fleet.rounds import CostFactory, LocalCost, LocalOutcome, LocalRequest
from swansim.fleet.run import FleetConfig, FleetResult, run_fleet

__all__ = ["Client", "ClientState", "CostFactory", "FleetConfig", "FleetResult", "LocalCost", "LocalOutcome",
           "LocalRequest", "Population", "Timeline", "run_fleet"]
