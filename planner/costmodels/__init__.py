"""Cost models (Aladdin linear, bilinear 4-coefficient), their files and their fitting."""

from planner.costmodels.files import find_cost_model, load_cost_model, save_cost_model
from planner.costmodels.models import AladdinCostModel, BilinearCoefficients, BilinearCostModel, cost_model_caveats

__all__ = [
    "AladdinCostModel",
    "BilinearCoefficients",
    "BilinearCostModel",
    "cost_model_caveats",
    "find_cost_model",
    "load_cost_model",
    "save_cost_model",
]
