"""What the Python tests compare numbers with: a normwise relative error
against a float64 reference, and a torch tensor as float64."""

import numpy as np


def rel_err(got, want):
    """max |got - want| / max |want|; the absolute error where want is all
    zeros."""
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    m = np.abs(want).max()
    return np.abs(got - want).max() / m if m > 0 else np.abs(got).max()


def f64(t):
    """A torch tensor's values as a float64 numpy array (bf16 included)."""
    return t.detach().float().numpy().astype(np.float64)
