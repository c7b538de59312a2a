"""planner: offline planning of LLM inference serving with exact optimization.

Every plan comes with a certified bound: MIP plans carry the solver's dual bound,
heuristic plans carry a combinatorial lower bound, and both pass an independent
validator that recomputes the objective from the problem data.
"""

__version__ = "0.1.0"
