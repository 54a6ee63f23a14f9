"""cellcast_tx.py — cellcast-tx/3 as a PyTorch module, trainable, exported as safetensors.

Written from ../shared/spec/model.md (never from the C sources). The module's state_dict
names are the spec's tensor names, so `export()` writes a file that `cellcast forward` and
cellcastd serve as is.

The module evaluates the spec's steps 1-7 *directly* (no caches) for a batch of channels
that each have a full window: `W = window_len(hp)` raw values ending at the forecast step t.
The cold start (fewer values than W) is the engine's business; a trainer never needs it.

Numerics: the per-window normalisation (step 2), the time features (step 3) and the
positional encoding (step 4) are computed in float64 and cast to float32, as the spec says;
everything else is float32, so the served numbers agree with the C engine to ~1e-5.

Training-only choices (the spec leaves them to the trainer; documented in
tools/torch/README.md): dropout on the attention and FFN outputs before each residual sum,
and a random integer shift of the positions per sample (the positions are absolute at
serving time, so only relative positions may be learned).
"""
import json
import math
import struct

import numpy as np
import torch
from torch import nn

FORMAT = "cellcast-tx/3"
LN_EPS = 1e-5
Z80 = 1.2815515655446004  # probit(0.9): P10-P90 is mean +- Z80 sd


class Hparams:
    """The shape of a model; the defaults are the spec's hourly defaults."""

    def __init__(self, features, step_seconds, horizon=96, d_model=64, n_heads=4, n_layers=2,
                 d_ff=128, patch_len=16, n_patches=21, norm_window=336, linear_window=336,
                 tz_offset_s=0, dropout=0.2):
        self.features = list(features)
        self.step_seconds = int(step_seconds)
        self.horizon = int(horizon)
        self.d_model, self.n_heads, self.n_layers, self.d_ff = d_model, n_heads, n_layers, d_ff
        self.patch_len, self.n_patches = patch_len, n_patches
        self.norm_window, self.linear_window = norm_window, linear_window
        self.tz_offset_s = int(tz_offset_s)
        self.dropout = dropout
        if d_model % n_heads or linear_window < 1 or patch_len < 1 or n_patches < 1:
            raise ValueError("bad hyperparameters")

    @property
    def n_features(self):
        return len(self.features)

    def metadata(self):
        return {"format": FORMAT, "d_model": self.d_model, "n_heads": self.n_heads,
                "n_layers": self.n_layers, "d_ff": self.d_ff, "patch_len": self.patch_len,
                "n_patches": self.n_patches, "norm_window": self.norm_window,
                "linear_window": self.linear_window, "horizon": self.horizon,
                "step_seconds": self.step_seconds, "tz_offset_s": self.tz_offset_s,
                "features": ",".join(self.features)}


def window_len(hp):
    """Raw values a full-window forecast reads: the N cached patches and the current token
    (N*P + P - 1 from t back), M values ending at the boundary e >= t-P+1, R for the linear
    path."""
    P = hp.patch_len
    return max(hp.n_patches * P + P - 1, hp.norm_window + P - 1, hp.linear_window)


class _Attention(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.q_proj, self.k_proj = nn.Linear(d, d), nn.Linear(d, d)
        self.v_proj, self.o_proj = nn.Linear(d, d), nn.Linear(d, d)


class _Ffn(nn.Module):
    def __init__(self, d, dff):
        super().__init__()
        self.up, self.down = nn.Linear(d, dff), nn.Linear(dff, d)


class _Layer(nn.Module):
    def __init__(self, d, dff):
        super().__init__()
        self.attn = _Attention(d)
        self.norm1 = nn.LayerNorm(d, eps=LN_EPS)
        self.ffn = _Ffn(d, dff)
        self.norm2 = nn.LayerNorm(d, eps=LN_EPS)


class _Floor(nn.Module):
    def __init__(self, F):
        super().__init__()
        self.register_buffer("floor", torch.zeros(F))


class _Calib(nn.Module):
    def __init__(self, F, Hz):
        super().__init__()
        self.register_buffer("sigma_scale", torch.ones(F, Hz))


class CellcastTx(nn.Module):
    def __init__(self, hp):
        super().__init__()
        self.hp = hp
        d, P, F, Hz = hp.d_model, hp.patch_len, hp.n_features, hp.horizon
        self.embed = nn.Linear(P + 4, d)
        self.channel_embed = nn.Embedding(F, d)
        self.layers = nn.ModuleList(_Layer(d, hp.d_ff) for _ in range(hp.n_layers))
        self.head = nn.Linear(d, 2 * Hz)
        self.linear = nn.Linear(hp.linear_window, Hz)
        self.norm = _Floor(F)
        self.calib = _Calib(F, Hz)
        self.drop = nn.Dropout(hp.dropout)
        with torch.no_grad():  # the spec's trial: the linear path starts as "repeat the last
            self.linear.weight.zero_()  # value"; the transformer head starts small
            self.linear.bias.zero_()
            self.head.weight.mul_(0.1)
            self.head.bias.zero_()

    # -- step 2-4 inputs, in float64 (numpy) ----------------------------------------------
    def prepare(self, x, t, f, pos_shift=None):
        """x: (B, W) raw values ending at step t (x[:, -1] is x_t), float64 numpy;
        t: (B,) absolute steps (int64); f: (B,) channel indices; pos_shift: (B,) integer
        position shifts (training) or None (serving: absolute positions).
        Returns a dict of float32 tensors: tokens (B, N+1, P+4), pe (B, N+1, d), xn_lin
        (B, R), xn_t (B,), and float64 mu, sigma (B,)."""
        hp = self.hp
        P, N, M, R, d = hp.patch_len, hp.n_patches, hp.norm_window, hp.linear_window, hp.d_model
        B, W = x.shape
        if W != window_len(hp):
            raise ValueError("window of %d values, expected %d" % (W, window_len(hp)))
        t = np.asarray(t, dtype=np.int64)
        e = (t + 1) // P * P - 1                        # step 1: the newest complete patch
        ie = (W - 1) - (t - e)                          # its last value's index in x
        rows = np.arange(B)[:, None]
        norm = x[rows, ie[:, None] + np.arange(-M + 1, 1)[None, :]]   # (B, M)
        mu = norm.mean(axis=1)
        sd = norm.std(axis=1)                           # population sd
        floor = self.norm.floor.detach().cpu().double().numpy()[f]
        sigma = np.sqrt(sd * sd + floor * floor) + 1e-5 * (1 + np.abs(mu))
        xn = (x - mu[:, None]) / sigma[:, None]         # (B, W)
        # token ends: the N cached patches q = e-(N-1)P .. e, then the current q = t
        qoff = np.concatenate([np.arange(-(N - 1), 1) * P, [0]])     # relative to e / t
        iq = np.concatenate([ie[:, None] + qoff[None, :N], np.full((B, 1), W - 1)], axis=1)
        q = np.concatenate([e[:, None] + qoff[None, :N], t[:, None]], axis=1)  # (B, N+1)
        patches = xn[rows[:, :, None], iq[:, :, None] + np.arange(-P + 1, 1)[None, None, :]]
        u = (q * hp.step_seconds + hp.tz_offset_s) / 86400.0
        fu = np.floor(u)
        pd = u - fu
        pw = np.fmod(fu + 3, 7) / 7 + pd / 7
        tau = np.stack([np.sin(2 * np.pi * pd), np.cos(2 * np.pi * pd),
                        np.sin(2 * np.pi * pw), np.cos(2 * np.pi * pw)], axis=-1)
        # (e+1) is a multiple of P, so a shifted position keeps q/P's fractional part
        pos = q / P if pos_shift is None else (q - e[:, None] - 1) / P + pos_shift[:, None]
        i2 = np.arange(0, d, 2)
        ang = pos[:, :, None] / np.power(10000.0, i2 / d)[None, None, :]
        pe = np.empty(pos.shape + (d,))
        pe[..., 0::2], pe[..., 1::2] = np.sin(ang), np.cos(ang)
        f32 = lambda a: torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))
        return {"tokens": f32(np.concatenate([patches, tau], axis=-1)), "pe": f32(pe),
                "xn_lin": f32(xn[:, W - R:]), "xn_t": f32(xn[:, W - 1]),
                "f": torch.from_numpy(np.asarray(f, dtype=np.int64)), "mu": mu, "sigma": sigma}

    # -- steps 4-6 --------------------------------------------------------------------------
    def forward(self, prep):
        """Returns y (B, Hz, 2): normalised mean (with the linear path) and log-sigma."""
        hp = self.hp
        H, d = hp.n_heads, hp.d_model
        dk = d // H
        z = self.embed(prep["tokens"]) + self.channel_embed(prep["f"])[:, None, :] + prep["pe"]
        B, T, _ = z.shape
        # cached token i sees cached 0..i, the current (last) token sees everything: causal
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)
        for layer in self.layers:
            a = layer.attn
            split = lambda v: v.view(B, T, H, dk).transpose(1, 2)      # (B, H, T, dk)
            qh, kh, vh = split(a.q_proj(z)), split(a.k_proj(z)), split(a.v_proj(z))
            s = qh @ kh.transpose(-1, -2) / math.sqrt(dk)
            s = s.masked_fill(mask, float("-inf"))
            o = (torch.softmax(s, dim=-1) @ vh).transpose(1, 2).reshape(B, T, d)
            z = layer.norm1(z + self.drop(a.o_proj(o)))
            ff = layer.ffn.down(torch.relu(layer.ffn.up(z)))
            z = layer.norm2(z + self.drop(ff))
        y = self.head(z[:, -1, :]).view(B, hp.horizon, 2)
        xn_t = prep["xn_t"]
        r = prep["xn_lin"] - xn_t[:, None]                              # tx/3 linear path
        mean = y[:, :, 0] + self.linear(r) + xn_t[:, None]
        return torch.stack([mean, y[:, :, 1]], dim=-1)

    def served(self, prep, y):
        """Step 7: mean and sd in KPI units (float64 numpy), sd with calib.sigma_scale."""
        mu, sigma = prep["mu"][:, None], prep["sigma"][:, None]
        yy = y.detach().double().numpy()
        s = self.calib.sigma_scale.detach().double().numpy()[prep["f"].numpy()]
        return yy[:, :, 0] * sigma + mu, np.exp(yy[:, :, 1]) * sigma * s


def nll(y, target):
    """The spec's objective: Gaussian NLL of the normalised targets (B, Hz), mean over all."""
    return (0.5 * ((target - y[:, :, 0]) * torch.exp(-y[:, :, 1])) ** 2 + y[:, :, 1]).mean()


def export(model, path, extra_metadata=None):
    """Writes the model as a cellcast-tx/3 safetensors file (F32, spec names, metadata as
    strings). No safetensors package needed: 8-byte little-endian header length, JSON
    header, raw little-endian tensors."""
    meta = {k: str(v) for k, v in model.hp.metadata().items()}
    meta.update({k: str(v) for k, v in (extra_metadata or {}).items()})
    header, blobs, off = {"__metadata__": meta}, [], 0
    for name, tensor in model.state_dict().items():
        arr = tensor.detach().cpu().to(torch.float32).contiguous().numpy().astype("<f4")
        if not np.isfinite(arr).all():
            raise ValueError("tensor %s has non-finite values" % name)
        raw = arr.tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    hj = json.dumps(header, separators=(",", ":")).encode()
    hj += b" " * (-len(hj) % 8)                        # align the data to 8 bytes
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(hj)))
        fh.write(hj)
        for raw in blobs:
            fh.write(raw)
