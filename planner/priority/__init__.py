"""SLO-aware priority scheduling (Huang et al., SC'25; FORMULATIONS.md §2): G objective, SA, exhaustive search, exact optimum."""
