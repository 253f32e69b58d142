"""The GPU backend: our own CUDA kernels through CuPy.

:class:`DeviceCSR` (a checked CSR matrix on the device; ``S @ X``, ``X @ S``) and
:class:`DeviceTLR` (TLR-MVM of a ``TLRMatrix`` or ``TLRBatch`` in two launches).
``wsesparse.sparse_matmul`` uses the same kernels for ``cupyx.scipy.sparse`` operands.
Importing this package does not import cupy; building either class does.
"""

from wsesparse.gpu.csr import DeviceCSR
from wsesparse.gpu.tlr import DeviceTLR

__all__ = ["DeviceCSR", "DeviceTLR"]
