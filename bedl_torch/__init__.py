"""bedl_torch: differentiable tree and sequence edit distances and BEDL."""
__version__ = "0.1.0"
