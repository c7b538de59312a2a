"""Deployment on heterogeneous clusters (FORMULATIONS.md §5, arXiv 2504.15303v1).

* `memory`: Eq. 1–2 (KV bytes per instance, candidate TP degrees).
* `throughput`: Alg. 1 static-batching estimate from the p1..p8 model, and a continuous-batching
  SLO-aware estimate from the Aladdin cost models.
* `enumeration`: TP choices across a cluster, ranked, with the best configuration.
* `cost_formulation` / `cost_solve`: cost-minimal (GPU type, TP) mix under an inventory (MILP),
  and the maximum servable load.
* `classes` / `classes_instance` / `classes_validator`: mixed fleet for request classes (size buckets or
  SLO classes; Mélange's model with continuous routing), one or several models sharing a GPU inventory.
* `routing` / `routing_formulation` / `routing_solve`: Alg. 2 mapper, RR/WRR/SI/MB, and the exact
  makespan MILP (R||Cmax with KV limits).
* `validator`: independent checks of cost plans and routings (no code shared with the MILPs).
"""
