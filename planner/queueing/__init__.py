"""Queue management (QLM): RWT estimator, request groups, queue-ordering MILP, baselines."""
