"""Capacity planning: how many GPUs of each type (and at which TP degree) a model needs to serve a
workload at each arrival rate under TTFT/ATGT SLOs, with certified lower bounds, the Eq. 7 fit,
$/h, and a self-contained HTML report.  See `planner.capacity.points` for the model of one point;
`planner.capacity.multi` for several models sharing one GPU inventory.
"""
