"""wsesparse: sparse GEMM/GEMV/TLR-MVM kernels as one AXPY per nonzero.

The same algorithm runs fast on the CPU (``sparse_matmul``; whole solvers in
``wsesparse.linalg``) and mapped onto a simulated wafer-scale core grid
(``wsesparse.wafer``).
"""

from wsesparse.csr import CSR
from wsesparse._outputs import release_cached_outputs
from wsesparse.matmul import sparse_matmul
from wsesparse.tlr import TLRBatch, TLRMatrix
from wsesparse.accelerate import accelerated  # also wsesparse.accelerate.enable/disable
from wsesparse import linalg  # solvers on the kernels: wsesparse.linalg.cg

__all__ = ["CSR", "sparse_matmul", "release_cached_outputs", "TLRMatrix", "TLRBatch"]
__all__ += ["accelerated"]
__version__ = "0.1.0"
