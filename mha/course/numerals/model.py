"""A small encoder-decoder Transformer built from :class:`mha.MultiHeadAttention`.

It holds the lecture's three multi-head attention blocks in one real model:

* ``encoder`` self-attention: Q = K = V = the Chinese characters, padding mask;
* ``decoder`` masked self-attention: Q = K = V = the digits so far, causal mask;
* ``cross`` attention: Q from the decoder, K = V = the encoder's output, padding mask.

Every layer is pre-LayerNorm: ``x + Attention(LayerNorm(x))``, then
``x + FFN(LayerNorm(x))``; a final LayerNorm closes each stack.

Shape legend: B batch, S source length, T target length, h heads,
d_model model width, d_k = d_model / h, V_src / V_tgt vocabulary sizes.
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import asdict, dataclass

import torch
from torch import nn

from mha.kv_cache import KVCache
from mha.layer import MultiHeadAttention
from mha.positional import sinusoidal_positional_encoding
from mha.validate import exporting, require_int
from .data import BOS, EOS, MAX_SOURCE_LEN, MAX_TARGET_LEN, PAD, SRC_TOKENS, TGT_TOKENS, decode_target, encode_source

__all__ = ["NumeralConfig", "NumeralTransformer", "FeedForward", "EncoderLayer", "DecoderLayer", "BLOCKS",
           "ablate_heads", "ABLATIONS"]

BLOCKS = ("encoder", "decoder", "cross")  # the three kinds of attention, as named in maps and ablations


@dataclass(frozen=True)
class NumeralConfig:
    """Sizes of a :class:`NumeralTransformer`."""

    d_model: int = 64
    n_heads: int = 4
    n_encoder_layers: int = 2
    n_decoder_layers: int = 2
    d_ff: int = 128
    dropout: float = 0.0

    def __post_init__(self):
        for name in ("d_model", "n_heads", "n_encoder_layers", "n_decoder_layers", "d_ff"):
            require_int(getattr(self, name), name, minimum=1)
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} must be divisible by n_heads={self.n_heads}")

    def to_dict(self) -> dict:
        return asdict(self)


class FeedForward(nn.Module):
    """Position-wise feed-forward layer: Linear(d_model, d_ff) -> ReLU -> Linear(d_ff, d_model)."""

    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.up = nn.Linear(d_model, d_ff)
        self.down = nn.Linear(d_ff, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.relu(self.up(x)))  # (B, L, d_model)


class EncoderLayer(nn.Module):
    """Pre-LN encoder layer: self-attention with the padding mask, then the FFN."""

    def __init__(self, cfg: NumeralConfig):
        super().__init__()
        self.norm_attn = nn.LayerNorm(cfg.d_model)
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, dropout=cfg.dropout)
        self.norm_ffn = nn.LayerNorm(cfg.d_model)
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff)

    def forward(self, x, src_mask, need_weights=False):
        """x (B, S, d_model), src_mask (B, 1, 1, S) -> ``(x (B, S, d_model), weights (B, h, S, S) or None)``."""
        h = self.norm_attn(x)
        out = self.self_attn(h, h, h, mask=src_mask, need_weights=need_weights)
        out, weights = out if need_weights else (out, None)
        x = x + out  # residual
        x = x + self.ffn(self.norm_ffn(x))  # residual
        return x, weights


class DecoderLayer(nn.Module):
    """Pre-LN decoder layer: masked self-attention, cross-attention, FFN.

    Its first lines mirror :class:`EncoderLayer` on purpose: each layer spells out its own
    norms and attention blocks, so the lecture's three MHA blocks are visible by name.
    """

    def __init__(self, cfg: NumeralConfig):
        super().__init__()
        self.norm_self = nn.LayerNorm(cfg.d_model)
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, dropout=cfg.dropout)
        self.norm_cross = nn.LayerNorm(cfg.d_model)
        self.cross_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, dropout=cfg.dropout)
        self.norm_ffn = nn.LayerNorm(cfg.d_model)
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff)

    def forward(self, y, memory, src_mask, cache=None, need_weights=False):
        """One decoder layer.

        Args:
            y: (B, T, d_model) the target so far (T = 1 for one decoding step).
            memory: (B, S, d_model) the encoder's output.
            src_mask: (B, 1, 1, S) padding mask of the source.
            cache: None for teacher forcing (causal self-attention over all T positions), or
                this layer's :class:`mha.KVCache` for incremental decoding (the new token
                attends to every cached one and itself).

        Returns:
            ``(y (B, T, d_model), self weights (B, h, T, T_all) or None, cross weights (B, h, T, S) or None,
            cache or None)``.
        """
        h = self.norm_self(y)
        if cache is None:
            out = self.self_attn(h, h, h, is_causal=True, need_weights=need_weights)
            out, self_w = out if need_weights else (out, None)
        else:
            out = self.self_attn.decode(h, h, h, cache, need_weights=need_weights)
            out, self_w, cache = out if need_weights else (out[0], None, out[1])
        y = y + out  # residual
        h = self.norm_cross(y)
        out = self.cross_attn(h, memory, memory, mask=src_mask, need_weights=need_weights)
        out, cross_w = out if need_weights else (out, None)
        y = y + out  # residual
        y = y + self.ffn(self.norm_ffn(y))  # residual
        return y, self_w, cross_w, cache


class NumeralTransformer(nn.Module):
    """Chinese numeral characters -> Arabic digits, an encoder-decoder Transformer.

    Args:
        cfg: a :class:`NumeralConfig` (default: d_model 64, 4 heads, 2 + 2 layers, FFN 128).

    Token embeddings are scaled by sqrt(d_model) and added to the sinusoidal
    positional encoding (:func:`mha.positional.sinusoidal_positional_encoding`).
    """

    def __init__(self, cfg: NumeralConfig | None = None):
        super().__init__()
        cfg = NumeralConfig() if cfg is None else cfg
        if not isinstance(cfg, NumeralConfig):
            raise TypeError(f"cfg must be a NumeralConfig, got {type(cfg).__name__}")
        self.cfg = cfg
        self.src_embed = nn.Embedding(len(SRC_TOKENS), cfg.d_model, padding_idx=PAD)
        self.tgt_embed = nn.Embedding(len(TGT_TOKENS), cfg.d_model, padding_idx=PAD)
        pe = sinusoidal_positional_encoding(max(MAX_SOURCE_LEN, MAX_TARGET_LEN) + 1, cfg.d_model)
        self.register_buffer("pe", pe, persistent=False)  # (P, d_model)
        self.encoder_layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.n_encoder_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.n_decoder_layers))
        self.encoder_norm = nn.LayerNorm(cfg.d_model)
        self.decoder_norm = nn.LayerNorm(cfg.d_model)
        self.readout = nn.Linear(cfg.d_model, len(TGT_TOKENS))

    # ------------------------------------------------------------ pieces
    def _embed(self, ids, table, offset=0):
        """ids (B, L) -> (B, L, d_model): scaled embedding + positional encoding from position ``offset``."""
        L = ids.shape[1]
        if offset + L > self.pe.shape[0]:
            raise ValueError(f"sequence too long: positions up to {offset + L}, the model has {self.pe.shape[0]}")
        return table(ids) * math.sqrt(self.cfg.d_model) + self.pe[offset: offset + L]  # (B, L, d_model)

    def _validate_ids(self, ids, name, vocab):
        if not isinstance(ids, torch.Tensor) or ids.dtype != torch.long or ids.dim() != 2:
            raise ValueError(f"{name} must be a (B, L) torch.long tensor of token ids, "
                             f"got {getattr(ids, 'dtype', type(ids).__name__)} {tuple(getattr(ids, 'shape', ()))}")
        if ids.numel() and not exporting() and (ids.min() < 0 or ids.max() >= len(vocab)):  # values: not while exporting
            raise ValueError(f"{name} ids must lie in [0, {len(vocab) - 1}], got [{ids.min()}, {ids.max()}]")

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor, need_weights: bool = False):
        """src (B, S) ids, src_mask (B, 1, 1, S) -> memory (B, S, d_model).

        With ``need_weights=True`` returns ``(memory, [weights (B, h, S, S) per layer])``.
        """
        self._validate_ids(src, "src", SRC_TOKENS)
        x = self._embed(src, self.src_embed)  # (B, S, d_model)
        maps = []
        for layer in self.encoder_layers:
            x, w = layer(x, src_mask, need_weights)
            maps.append(w)
        memory = self.encoder_norm(x)  # (B, S, d_model)
        return (memory, maps) if need_weights else memory

    def decode(self, tgt_in, memory, src_mask, need_weights: bool = False):
        """Teacher forcing: tgt_in (B, T) -> logits (B, T, V_tgt), all positions at once (``is_causal=True``).

        With ``need_weights=True`` returns ``(logits, self maps, cross maps)``, one (B, h, T, T)
        and one (B, h, T, S) tensor per decoder layer. Padding at the end of
        ``tgt_in`` needs no mask: a real token never sees a later position.
        """
        self._validate_ids(tgt_in, "tgt_in", TGT_TOKENS)
        y = self._embed(tgt_in, self.tgt_embed)  # (B, T, d_model)
        self_maps, cross_maps = [], []
        for layer in self.decoder_layers:
            y, sw, cw, _ = layer(y, memory, src_mask, need_weights=need_weights)
            self_maps.append(sw)
            cross_maps.append(cw)
        logits = self.readout(self.decoder_norm(y))  # (B, T, V_tgt)
        return (logits, self_maps, cross_maps) if need_weights else logits

    def forward(self, src, src_mask, tgt_in):
        """Training forward pass: ``(src (B, S), src_mask (B, 1, 1, S), tgt_in (B, T)) -> logits (B, T, V_tgt)``."""
        return self.decode(tgt_in, self.encode(src, src_mask), src_mask)

    def attention_maps(self, src, src_mask, tgt_in) -> dict:
        """Every attention weight of one teacher-forced pass, for inspection.

        Returns:
            ``{"encoder": [(B, h, S, S)] * n_enc, "decoder": [(B, h, T, T)] * n_dec,
            "cross": [(B, h, T, S)] * n_dec, "logits": (B, T, V_tgt)}``.
        """
        memory, enc = self.encode(src, src_mask, need_weights=True)
        logits, dec, cross = self.decode(tgt_in, memory, src_mask, need_weights=True)
        return {"encoder": enc, "decoder": dec, "cross": cross, "logits": logits}

    def decode_step(self, token, memory, src_mask, caches=None, need_weights: bool = False):
        """One step of incremental decoding with a KV cache per decoder layer.

        Args:
            token: (B, 1) the newest target token (``<bos>`` at the first step).
            memory: (B, S, d_model) from :meth:`encode`; src_mask: (B, 1, 1, S).
            caches: the list returned by the previous step, or None at the first
                step (one empty :class:`mha.KVCache` per decoder layer).

        Returns:
            ``(logits (B, V_tgt), caches)``; with ``need_weights=True``
            ``(logits, caches, cross weights [(B, h, 1, S)] per layer)``.
        """
        self._validate_ids(token, "token", TGT_TOKENS)
        if token.shape[1] != 1:
            raise ValueError(f"decode_step takes one token per sequence, shape (B, 1); got {tuple(token.shape)}")
        if caches is None:
            caches = [KVCache() for _ in self.decoder_layers]
        if len(caches) != len(self.decoder_layers):
            raise ValueError(f"expected {len(self.decoder_layers)} caches (one per decoder layer), got {len(caches)}")
        y = self._embed(token, self.tgt_embed, offset=caches[0].length)  # (B, 1, d_model)
        new_caches, cross_maps = [], []
        for layer, cache in zip(self.decoder_layers, caches):
            y, _, cw, cache = layer(y, memory, src_mask, cache=cache, need_weights=need_weights)
            new_caches.append(cache)
            cross_maps.append(cw)
        logits = self.readout(self.decoder_norm(y))[:, 0]  # (B, V_tgt)
        return (logits, new_caches, cross_maps) if need_weights else (logits, new_caches)

    @torch.no_grad()
    def greedy_ids(self, src, src_mask, max_len: int = MAX_TARGET_LEN) -> torch.Tensor:
        """Greedy decoding with the KV cache: (B, S) -> (B, T) predicted ids, ``<eos>`` then ``<pad>``."""
        memory = self.encode(src, src_mask)
        B = src.shape[0]
        token = torch.full((B, 1), BOS, dtype=torch.long, device=src.device)  # (B, 1)
        done = torch.zeros(B, dtype=torch.bool, device=src.device)
        caches, out = None, []
        for _ in range(max_len):
            logits, caches = self.decode_step(token, memory, src_mask, caches)  # (B, V_tgt)
            nxt = logits.argmax(-1).masked_fill(done, PAD)  # (B,)
            out.append(nxt)
            done |= nxt == EOS
            if done.all():
                break
            token = nxt[:, None]  # (B, 1)
        return torch.stack(out, dim=1)  # (B, T)

    def translate(self, words, batch_size: int = 1024) -> list[str]:
        """Chinese numerals -> digit strings by greedy decoding (``["两千零二十六"] -> ["2026"]``)."""
        words = [words] if isinstance(words, str) else list(words)
        was_training = self.training
        self.eval()
        out = []
        try:
            for i in range(0, len(words), batch_size):
                src, src_mask = encode_source(words[i: i + batch_size])
                out += decode_target(self.greedy_ids(src, src_mask))
        finally:
            self.train(was_training)
        return out

    # ------------------------------------------------------------ inspection
    def attention(self, block: str, layer: int) -> MultiHeadAttention:
        """The :class:`mha.MultiHeadAttention` of ``block`` (one of :data:`BLOCKS`) in layer ``layer``."""
        if block not in BLOCKS:
            raise ValueError(f"block must be one of {BLOCKS}, got {block!r}")
        layers = self.encoder_layers if block == "encoder" else self.decoder_layers
        if require_int(layer, "layer") >= len(layers):
            raise ValueError(f"layer must be an int in [0, {len(layers) - 1}] for the {block} block, got {layer!r}")
        if block == "encoder":
            return layers[layer].self_attn
        return layers[layer].self_attn if block == "decoder" else layers[layer].cross_attn

    def heads(self) -> list[tuple[str, int, int]]:
        """Every head of the model as ``(block, layer, head)``."""
        n_layers = {"encoder": self.cfg.n_encoder_layers, "decoder": self.cfg.n_decoder_layers,
                    "cross": self.cfg.n_decoder_layers}
        return [(b, l, i) for b in BLOCKS for l in range(n_layers[b]) for i in range(self.cfg.n_heads)]


def zero_head_hook(head: int, d_k: int):
    """A forward pre-hook for ``W_o``: zero head ``head``'s d_k columns of the Concat (B, L, d_model)."""

    def hook(module, inputs):
        (concat,) = inputs
        keep = torch.ones(concat.shape[-1], dtype=concat.dtype, device=concat.device)  # (d_model,)
        keep[head * d_k: (head + 1) * d_k] = 0
        return (concat * keep,)  # (B, L, d_model), a new tensor: the input is not changed

    return hook


def _replace_head_hook(head: int, d_k: int, value: torch.Tensor):
    """A forward pre-hook for ``W_o``: head ``head``'s d_k columns of the Concat become ``value``.

    ``value``: (d_k,) the same for every position (mean-ablation), or (P, d_k) one row per query
    position (per-position mean-ablation; positions past P take the last row).
    """

    def hook(module, inputs):
        (concat,) = inputs
        L = concat.shape[1]
        v = value.to(concat.dtype)
        if v.dim() == 2:
            v = v[torch.arange(L).clamp_max(v.shape[0] - 1)]  # (L, d_k)
        out = concat.clone()  # (B, L, d_model): the input is not changed
        out[..., head * d_k: (head + 1) * d_k] = v
        return (out,)

    return hook


ABLATIONS = ("zero", "mean", "position_mean")


@contextlib.contextmanager
def ablate_heads(model: NumeralTransformer, heads, means: dict | None = None, mode: str = "zero"):
    """Inside the block, the given heads are ablated: their part of the Concat before W^O is replaced.

    Args:
        heads: ``(block, layer, head)`` triples (see :meth:`NumeralTransformer.heads`), or one triple.
        mode: ``"zero"`` (the head contributes nothing), ``"mean"`` (its output is replaced by its
            average over real positions of other numbers) or ``"position_mean"`` (by its average at
            the same query position); the two mean modes need ``means`` from
            :func:`mha.course.numerals.analysis.head_means`. Mean modes assume teacher forcing (positions from 0).

    Example::

        with ablate_heads(model, ("cross", 1, 2)):
            accuracy = exact_match(model, numbers)
    """
    if mode not in ABLATIONS:
        raise ValueError(f"mode must be one of {ABLATIONS}, got {mode!r}")
    if mode != "zero" and means is None:
        raise ValueError(f"mode={mode!r} needs means=head_means(model, numbers)")
    if isinstance(heads, tuple) and len(heads) == 3 and isinstance(heads[0], str):
        heads = [heads]
    handles = []
    try:
        for block, layer, head in heads:
            attn = model.attention(block, layer)
            if require_int(head, "head") >= attn.n_heads:
                raise ValueError(f"head must be an int in [0, {attn.n_heads - 1}], got {head!r}")
            if mode == "zero":
                hook = zero_head_hook(head, attn.d_k)
            else:
                mean, per_position = means[(block, layer, head)]
                hook = _replace_head_hook(head, attn.d_k, mean if mode == "mean" else per_position)
            handles.append(attn.W_o.register_forward_pre_hook(hook))
        yield model
    finally:
        for handle in handles:
            handle.remove()
