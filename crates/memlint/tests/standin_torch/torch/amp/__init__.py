from . import grad_scaler  # noqa: F401
