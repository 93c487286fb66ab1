"""The GE executor: a GraphDef prepared once into a plan (`plan`) and run node by node on the CPU,
every result checked against what the graph declares (`checks`)."""
from .checks import GeExecutionError
from .plan import GraphPlan, compile_graph, execute_graph, observing

__all__ = ["GeExecutionError", "GraphPlan", "compile_graph", "execute_graph", "observing"]
