"""Shapes of a decoder-only transformer, for whole-network training estimates.

``TransformerConfig`` lists the weight matrices a training step streams through
the wafer (per decoder layer: the fused Q/K/V projection, the attention output
projection, the FFN up and down projections; once: the unembedding) and the
dense work that stays on the wafer (attention scores). ``TransformerConfig.gpt3``
gives the eight models of the GPT-3 paper; ``TransformerConfig.scaled`` builds
larger ones (a trillion parameters, brain scale) with GPT-3's aspect ratio.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from wsesparse._checks import check_int, check_real

# Brown et al. 2020, "Language Models are Few-Shot Learners", Table 2.1:
# name -> (n_layers, d_model, n_heads, d_head, batch size in tokens). The d_head column is
# kept as printed but not used: the table's 1.3B row has 24 heads of 128 (3072, not
# d_model 2048), so heads are d_model / n_heads wide (attention width = d_model). All eight use a
# 2048-token context, d_ff = 4 d_model (section 2.1) and were trained on 300 B tokens.
# GPT-2's BPE vocabulary of 50,257 tokens (Radford et al. 2019) is shared.
GPT3_TABLE = {
    "125M": (12, 768, 12, 64, 500_000),
    "350M": (24, 1024, 16, 64, 500_000),
    "760M": (24, 1536, 16, 96, 500_000),
    "1.3B": (24, 2048, 24, 128, 1_000_000),
    "2.7B": (32, 2560, 32, 80, 1_000_000),
    "6.7B": (32, 4096, 32, 128, 2_000_000),
    "13B": (40, 5140, 40, 128, 2_000_000),   # d_model 5140 as printed (n_heads * d_head = 5120)
    "175B": (96, 12288, 96, 128, 3_200_000),
}
GPT3_TRAINING_TOKENS = 300_000_000_000   # GPT-3 paper, section 2.2
GPT3_VOCAB = 50257
GPT3_CONTEXT = 2048

# Kaplan et al. 2020, "Scaling Laws for Neural Language Models": loss vs parameters
# L(N) = (N_c / N) ** alpha_N (eq. 1.1, N_c = 8.8e13, alpha_N = 0.076) and the critical
# batch B_crit(L) = B_* / L ** (1 / alpha_B) (eq. 1.4, B_* = 2e8 tokens, alpha_B = 0.21).
_KAPLAN_NC, _KAPLAN_ALPHA_N = 8.8e13, 0.076
_KAPLAN_BSTAR, _KAPLAN_ALPHA_B = 2e8, 0.21


def kaplan_critical_batch(n_params: float) -> float:
    """Kaplan et al. 2020's critical batch (tokens) at the loss their law predicts for
    ``n_params`` non-embedding parameters (eq. 1.1 and 1.4).

    Examples
    --------
    >>> round(kaplan_critical_batch(175e9) / 1e6, 1)
    21.1
    """
    n_params = check_real(n_params, "n_params", minimum=0, inclusive=(False, True))
    loss = (_KAPLAN_NC / n_params) ** _KAPLAN_ALPHA_N
    return _KAPLAN_BSTAR / loss ** (1 / _KAPLAN_ALPHA_B)



def gpt3_name(name) -> tuple[str, str | None]:
    """``name`` without a 'GPT-3 ' or 'gpt3-' prefix, and the :data:`GPT3_TABLE` key it
    names in any case, or None ('1.3b' is the paper's 1.3B, not 1.3e9 parameters).

    Examples
    --------
    >>> gpt3_name("gpt3-1.3b"), gpt3_name("1T")
    (('1.3b', '1.3B'), ('1T', None))
    """
    key = re.sub(r"(?i)^(gpt-3 |gpt3-)", "", str(name).strip())
    return key, {k.lower(): k for k in GPT3_TABLE}.get(key.lower())

@dataclass(frozen=True)
class TransformerConfig:
    """A decoder-only transformer (GPT style) as the training estimate sees it.

    Parameters
    ----------
    name : str
    n_layers, d_model, n_heads : int
    d_ff : int, optional
        FFN width (default ``4 * d_model``).
    seq_len : int
        Context length (tokens per sequence; attention scores are ``seq_len`` wide).
    vocab : int
        Vocabulary size (token embedding and the tied unembedding).
    d_head : int, optional
        Width of one head (default ``d_model // n_heads``); Q, K and V are
        ``n_heads * d_head`` wide.
    batch_tokens : int, optional
        The model's training batch in tokens (the GPT-3 table's, or Kaplan's critical
        batch for :meth:`scaled`); ``estimate_training`` uses it when not given one.

    Examples
    --------
    >>> c = TransformerConfig.gpt3("175B")
    >>> c.n_layers, c.d_model, round(c.n_params / 1e9, 1)
    (96, 12288, 174.6)
    >>> TransformerConfig("tiny", n_layers=2, d_model=64, n_heads=4).d_ff
    256
    """

    name: str
    n_layers: int
    d_model: int
    n_heads: int
    d_ff: int | None = None
    seq_len: int = GPT3_CONTEXT
    vocab: int = GPT3_VOCAB
    d_head: int | None = None
    batch_tokens: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TypeError(f"TransformerConfig.name must be a str, got {self.name!r}")
        for f in ("n_layers", "d_model", "n_heads", "seq_len", "vocab"):
            check_int(getattr(self, f), f"TransformerConfig.{f}", minimum=1)
        if self.d_ff is None:
            object.__setattr__(self, "d_ff", 4 * self.d_model)
        if self.d_head is None:
            # (more heads than d_model made heads 1 wide and Q, K, V n_heads wide, not
            # d_model: a review)
            if self.n_heads > self.d_model:
                raise ValueError(f"TransformerConfig.n_heads ({self.n_heads}) exceeds d_model "
                                 f"({self.d_model}): heads are d_model // n_heads wide; give "
                                 "d_head for heads of another width")
            object.__setattr__(self, "d_head", self.d_model // self.n_heads)
        check_int(self.d_ff, "TransformerConfig.d_ff", minimum=1)
        check_int(self.d_head, "TransformerConfig.d_head", minimum=1)
        if self.batch_tokens is not None:
            check_int(self.batch_tokens, "TransformerConfig.batch_tokens", minimum=1)

    @property
    def d_attn(self) -> int:
        """Width of Q, K and V: ``n_heads * d_head``."""
        return self.n_heads * self.d_head

    def layer_matrices(self) -> tuple[tuple[str, int, int], ...]:
        """The weight matrices of one decoder layer as ``(name, outputs, inputs)``."""
        d, a, f = self.d_model, self.d_attn, self.d_ff
        return (("attention qkv", 3 * a, d), ("attention out", d, a),
                ("ffn up", f, d), ("ffn down", d, f))

    @property
    def layer_weights(self) -> int:
        """Weights of the four matrices of one decoder layer (no biases)."""
        return sum(m * k for _, m, k in self.layer_matrices())

    @property
    def layer_params(self) -> int:
        """All parameters of one decoder layer: matrices, biases, two layer norms."""
        return self.layer_weights + 3 * self.d_attn + 2 * self.d_model + self.d_ff + 4 * self.d_model

    @property
    def embedding_params(self) -> int:
        """Token embedding (tied with the unembedding) and learned positions."""
        return self.vocab * self.d_model + self.seq_len * self.d_model

    @property
    def n_params(self) -> int:
        """Parameters including embeddings (token, position) and the final layer norm."""
        return self.n_layers * self.layer_params + self.embedding_params + 2 * self.d_model

    @property
    def non_embedding_params(self) -> int:
        """Parameters without the embeddings (Kaplan et al.'s N)."""
        return self.n_params - self.embedding_params

    def attention_macs_per_token(self) -> int:
        """Dense multiply-adds of one layer's attention scores per token, forward:
        ``Q K^T`` and ``A V`` over the full context (causal masking not exploited)."""
        return 2 * self.seq_len * self.d_attn

    def elementwise_ops_per_token(self) -> int:
        """Rough elementwise operations of one layer per token, forward: softmax (~5 per
        score), two layer norms (~5 per value), GELU (~8 per FFN value), two residual adds
        (inferred counts; small next to the products)."""
        return 5 * self.n_heads * self.seq_len + 10 * self.d_model + 8 * self.d_ff + 2 * self.d_model

    @classmethod
    def gpt3(cls, name: str) -> "TransformerConfig":
        """One of the GPT-3 paper's models (Brown et al. 2020, Table 2.1): '125M', '350M',
        '760M', '1.3B', '2.7B', '6.7B', '13B' or '175B', in any case (a 'GPT-3 ' or
        'gpt3-' prefix is accepted), as ``wsesparse train --model`` takes them."""
        key = gpt3_name(name)[1]
        if key is None:
            raise ValueError(f"GPT-3 model must be one of {list(GPT3_TABLE)}, got {name!r}")
        L, d, h, _, batch = GPT3_TABLE[key]
        return cls(f"GPT-3 {key}", L, d, h, batch_tokens=batch)

    @classmethod
    def scaled(cls, n_params: float, name: str | None = None, aspect: float = 128.0,
               d_head: int = 128, reference: str = "175B") -> "TransformerConfig":
        """A GPT-style model of about ``n_params`` parameters with GPT-3 175B's shape.

        ``d_model = aspect * n_layers`` (GPT-3 175B: 12288 / 96 = 128), ``d_ff = 4 d_model``,
        heads of ``d_head``; ``n_layers`` solves ``12 n_layers d_model^2 ~ n_params``. The
        batch is the reference model's (GPT-3 175B: 3.2 M tokens) times the ratio of
        Kaplan's critical batches (:func:`kaplan_critical_batch`) of the two sizes, i.e.
        larger models reach lower loss and train efficiently at larger batches.

        Examples
        --------
        >>> t = TransformerConfig.scaled(1e12, name="1T")
        >>> t.n_layers, t.d_model, round(t.n_params / 1e12, 2), t.batch_tokens
        (172, 22016, 1.0, 6027264)
        """
        n_params = check_real(n_params, "n_params", minimum=1e6)
        aspect = check_real(aspect, "aspect", minimum=1)
        d_head = check_int(d_head, "d_head", minimum=1)
        layers = max(1, round((n_params / (12 * aspect ** 2)) ** (1 / 3)))
        d_model = max(d_head, round(aspect * layers / d_head) * d_head)
        ref = cls.gpt3(reference)
        cfg = cls(name or f"{n_params:.3g} params", layers, d_model, d_model // d_head,
                  d_head=d_head)
        ratio = kaplan_critical_batch(cfg.non_embedding_params) / kaplan_critical_batch(
            ref.non_embedding_params)
        batch = int(round(ref.batch_tokens * ratio / ref.seq_len)) * ref.seq_len
        return cls(cfg.name, layers, d_model, d_model // d_head, d_head=d_head,
                   batch_tokens=max(ref.seq_len, batch))

    def __str__(self) -> str:
        return (f"{self.name}: {self.n_layers} layers, d_model {self.d_model}, {self.n_heads} "
                f"heads of {self.d_head}, d_ff {self.d_ff}, context {self.seq_len}, vocab "
                f"{self.vocab}, {self.n_params / 1e9:,.3g} B parameters")
