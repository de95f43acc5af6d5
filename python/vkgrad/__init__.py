"""vkgrad — Python client of vkgradd, the shared GPU daemon computing
linear-layer backward passes (dW = dYᵀ·X, db = Σ dY, dX = dY·W).

Pure Python over libvkgrad.so (ctypes); numpy arrays are zero-copy views of
shared-memory regions. See README.md ("Python") and proto/README.md.

    import vkgrad
    with vkgrad.connect() as c:
        g = c.linear_backward(x, dy, w)          # {"dw", "db", "dx"}: numpy arrays
        r = c.region(nbytes)
        xv = r.ndarray((B, I), "float32", offset=0)
        fut = c.submit(xv, dyv, wv, out={"dw": dwv})
        fut.result()

`vkgrad.torch` (imported on its own) holds the PyTorch layer.
"""

from ._lib import path as library_path
from ._optim import MAX_PARAMS
from .client import (ACTIVATIONS, CODES, VARIANTS, Client, Error, Future, Region, Tensor, connect,
                     default_socket)
from .dtypes import TOLERANCE, from_bf16, to_bf16

__version__ = "0.2.0"
__all__ = ["ACTIVATIONS", "CODES", "MAX_PARAMS", "VARIANTS", "Client", "Error", "Future", "Region", "TOLERANCE", "Tensor", "connect",
           "default_socket", "from_bf16", "library_path", "to_bf16"]
