"""Wafer-scale execution model of the streamed sparse GEMM.

The pipeline reads in module order: ``machine`` (what the hardware is) ->
``layout`` (where activations live, SRAM, passes) -> ``balance`` (which row each
input feature lives on) -> ``estimate`` (event-level cycles, compiled) and
``execute`` (the same dataflow with real numbers) -> ``report``.
"""

from wsesparse.wafer.balance import BALANCERS, Assignment, balance
from wsesparse.wafer.estimate import estimate_gemm, random_weights
from wsesparse.wafer.execute import execute_gemm
from wsesparse.wafer.gradient import GradientReport, delta, estimate_gradient, sddmm
from wsesparse.wafer.gemv import REDUCTIONS, GemvReport, estimate_gemv, execute_gemv
from wsesparse.wafer.layout import Layout, make_layout
from wsesparse.wafer.machine import DEFAULT_DTYPE, PRESETS, PSUM_READINGS, WSE2, WSE3, Machine, with_psum
from wsesparse.wafer.report import GemmReport
from wsesparse.wafer.training import (LayerEstimate, PhaseEstimate, TrainingReport,
                                      estimate_training, scaling_curve)
from wsesparse.wafer.transformer import TransformerConfig, kaplan_critical_batch
from wsesparse.wafer.tlr import PUBLISHED_TLRMVM_BYTES_PER_S, TLRMVMEstimate, estimate_tlrmvm

__all__ = ["Machine", "WSE2", "WSE3", "PRESETS", "PSUM_READINGS", "with_psum", "DEFAULT_DTYPE", "Layout", "make_layout", "Assignment",
           "balance", "BALANCERS", "estimate_gemm", "execute_gemm", "random_weights",
           "GemmReport", "estimate_gemv", "execute_gemv", "GemvReport", "REDUCTIONS",
           "estimate_gradient", "GradientReport", "delta", "sddmm",
           "estimate_tlrmvm", "TLRMVMEstimate", "PUBLISHED_TLRMVM_BYTES_PER_S",
           "TransformerConfig", "kaplan_critical_batch", "estimate_training", "scaling_curve",
           "TrainingReport", "LayerEstimate", "PhaseEstimate"]
