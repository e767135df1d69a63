"""Imports torch and never uses CUDA."""
import torch  # noqa: F401

print("trained on the CPU")
