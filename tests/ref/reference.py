"""reference.py — an independent NumPy (float64) implementation of cellcast-tx/3 and tx/2.

Written from /work/shared/spec/model.md alone (never from the C sources), so that the C
engine, the C direct-evaluation path (cc_ref.c) and the PyTorch benchmark can all be checked
against it. Everything is computed in float64; weights are whatever the file holds (F32),
raw inputs are whatever the caller passes (the golden generator passes float32-rounded
values, which is what the C engine receives).

Contents:
  - read_safetensors / write_safetensors: a minimal pure-Python safetensors codec
    (8-byte little-endian header length, JSON header, raw little-endian tensors; F32 is
    written, F32/F16/BF16 are read). No safetensors package is needed.
  - Model: hyperparameters from __metadata__ plus the weights, by spec name.
  - forward(model, f, x, p0, t): the spec's steps 1-6 for channel f at step t, returning
    the head output y (Hz, 2) (tx/3: y[:, 0] with the linear path), mu, sigma and a trace
    of every intermediate tensor; forecast_units(model, f, res): step 7, the served mean
    and sd (tx/3: sd times calib.sigma_scale).
A cellcast-tx/2 file is a model with R = 0: no linear path, the tx/2 floor, unit calibration.
"""
import json
import math
import struct

import numpy as np

FORMAT_TX2 = "cellcast-tx/2"
FORMAT_TX3 = "cellcast-tx/3"
FORMAT = FORMAT_TX2
LN_EPS = 1e-5

# ---------------------------------------------------------------------------------------
# safetensors


def read_safetensors(path):
    """Returns (tensors: dict name -> float64 ndarray, metadata: dict str -> str)."""
    with open(path, "rb") as fh:
        buf = fh.read()
    if len(buf) < 8:
        raise ValueError("file shorter than the 8-byte header length")
    (hlen,) = struct.unpack("<Q", buf[:8])
    if 8 + hlen > len(buf):
        raise ValueError("header length %d past the end of the file" % hlen)
    header = json.loads(buf[8:8 + hlen].decode("utf-8"))
    data = buf[8 + hlen:]
    meta = header.pop("__metadata__", {}) or {}
    tensors = {}
    for name, info in header.items():
        dtype, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
        count = int(np.prod(shape)) if shape else 1
        raw = data[begin:end]
        if dtype == "F32":
            arr = np.frombuffer(raw, dtype="<f4", count=count).astype(np.float64)
        elif dtype == "F16":
            arr = np.frombuffer(raw, dtype="<f2", count=count).astype(np.float64)
        elif dtype == "BF16":
            u16 = np.frombuffer(raw, dtype="<u2", count=count).astype(np.uint32)
            arr = (u16 << 16).view(np.float32).astype(np.float64)
        else:
            raise ValueError("tensor %s: unsupported dtype %s" % (name, dtype))
        if end - begin != count * (2 if dtype != "F32" else 4):
            raise ValueError("tensor %s: byte size does not match its shape" % name)
        tensors[name] = arr.reshape(shape)
    return tensors, meta


def write_safetensors(path, tensors, metadata):
    """Writes F32 tensors (dict name -> array) in name order, with string metadata."""
    header = {"__metadata__": {k: str(v) for k, v in metadata.items()}}
    blobs, offset = [], 0
    for name in sorted(tensors):
        arr = np.ascontiguousarray(np.asarray(tensors[name], dtype="<f4"))
        raw = arr.tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * ((8 - len(hjson) % 8) % 8)  # align the data to 8 bytes, as safetensors does
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(hjson)))
        fh.write(hjson)
        for raw in blobs:
            fh.write(raw)


# ---------------------------------------------------------------------------------------
# model


class Model:
    """Hyperparameters (spec letters) and weights (float64 arrays by spec tensor name)."""

    def __init__(self, tensors, meta):
        fmt = meta.get("format")
        if fmt not in (FORMAT_TX2, FORMAT_TX3):
            raise ValueError("unknown format %r" % fmt)
        self.R = int(meta["linear_window"]) if fmt == FORMAT_TX3 else 0
        if fmt == FORMAT_TX3 and self.R < 1:
            raise ValueError("linear_window must be >= 1 in %s" % FORMAT_TX3)
        self.d = int(meta["d_model"])
        self.H = int(meta["n_heads"])
        self.L = int(meta["n_layers"])
        self.dff = int(meta["d_ff"])
        self.P = int(meta["patch_len"])
        self.N = int(meta["n_patches"])
        self.M = int(meta["norm_window"])
        self.Hz = int(meta["horizon"])
        self.S = int(meta["step_seconds"])
        self.tz = int(meta["tz_offset_s"])
        self.features = meta["features"].split(",")
        self.F = len(self.features)
        self.meta = dict(meta)
        self.w = tensors
        self._check_shapes()

    @classmethod
    def load(cls, path):
        t, m = read_safetensors(path)
        return cls(t, m)

    def expected_shapes(self):
        d, dff, P, F, Hz = self.d, self.dff, self.P, self.F, self.Hz
        s = {"embed.weight": (d, P + 4), "embed.bias": (d,), "channel_embed.weight": (F, d),
             "head.weight": (2 * Hz, d), "head.bias": (2 * Hz,)}
        for l in range(self.L):
            for p in ("q_proj", "k_proj", "v_proj", "o_proj"):
                s["layers.%d.attn.%s.weight" % (l, p)] = (d, d)
                s["layers.%d.attn.%s.bias" % (l, p)] = (d,)
            for n in ("norm1", "norm2"):
                s["layers.%d.%s.weight" % (l, n)] = (d,)
                s["layers.%d.%s.bias" % (l, n)] = (d,)
            s["layers.%d.ffn.up.weight" % l] = (dff, d)
            s["layers.%d.ffn.up.bias" % l] = (dff,)
            s["layers.%d.ffn.down.weight" % l] = (d, dff)
            s["layers.%d.ffn.down.bias" % l] = (d,)
        if self.R:
            s.update({"linear.weight": (Hz, self.R), "linear.bias": (Hz,), "norm.floor": (F,),
                      "calib.sigma_scale": (F, Hz)})
        return s

    def _check_shapes(self):
        if self.d % self.H:
            raise ValueError("n_heads does not divide d_model")
        for name, shape in self.expected_shapes().items():
            if name not in self.w:
                raise ValueError("missing tensor %s" % name)
            if tuple(self.w[name].shape) != shape:
                raise ValueError("tensor %s has shape %s, expected %s"
                                 % (name, self.w[name].shape, shape))
        if self.R and ((self.w["norm.floor"] < 0).any() or (self.w["calib.sigma_scale"] <= 0).any()):
            raise ValueError("norm.floor must be >= 0 and calib.sigma_scale > 0")


# ---------------------------------------------------------------------------------------
# the spec's building blocks


def boundary(t, P):
    """Step 1: last step of the newest complete patch."""
    return ((t + 1) // P) * P - 1


def norm_stats(x, p0, e, M, floor=None):
    """Step 2: mean and population sd of x_{max(p0, e-M+1)..e}; tx/2 (floor None):
    sigma = sd + 1e-5(1+|mu|); tx/3: sigma = sqrt(sd^2 + floor^2) + 1e-5(1+|mu|).
    x[i] is the raw value of absolute step p0 + i."""
    lo = max(p0, e - M + 1)
    w = np.asarray(x[lo - p0:e - p0 + 1], dtype=np.float64)
    mu = w.mean()
    sd = math.sqrt(((w - mu) ** 2).mean())
    if floor is not None:
        sd = math.sqrt(sd * sd + floor * floor)
    return mu, sd + 1e-5 * (1.0 + abs(mu))


def time_features(p, S, tz):
    """Step 3, in double precision: tau(p) = [sin 2pi pd, cos 2pi pd, sin 2pi pw, cos 2pi pw]."""
    u = (p * S + tz) / 86400  # exact integer numerator, one correctly rounded division
    fu = math.floor(u)
    pd = u - fu
    pw = math.fmod(fu + 3, 7) / 7 + pd / 7
    return np.array([math.sin(2 * math.pi * pd), math.cos(2 * math.pi * pd),
                     math.sin(2 * math.pi * pw), math.cos(2 * math.pi * pw)])


def pos_encoding(pos, d):
    """Step 4: PE[2i] = sin(pos / 10000^(2i/d)), PE[2i+1] = cos(same), double precision."""
    pe = np.empty(d)
    for i in range(d // 2):
        a = pos / (10000.0 ** (2 * i / d))
        pe[2 * i] = math.sin(a)
        pe[2 * i + 1] = math.cos(a)
    return pe


def layer_norm(x, g, b):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return g * (x - mean) / np.sqrt(var + LN_EPS) + b


def attention_mask(n):
    """(n+1, n+1) boolean: cached token i sees cached 0..i; the current token (row n) sees all."""
    mask = np.tril(np.ones((n + 1, n + 1), dtype=bool))
    mask[:n, n] = False
    mask[n, :] = True
    return mask


# ---------------------------------------------------------------------------------------
# the forecast at step t


def token_ends(model, p0, t):
    """End steps of the cached tokens (oldest first) and of the current token (last)."""
    P, N = model.P, model.N
    e = boundary(t, P)
    cached = [e - j * P for j in range(N - 1, -1, -1) if e - j * P - P + 1 >= p0]
    return cached + [t]


def forward(model, f, x, p0, t, want_trace=True):
    """Steps 1-6 for feature f whose raw values are x[p - p0], p = p0..t (len >= t-p0+1).

    Returns None on cold start (no complete patch yet), else a dict with
      y (Hz, 2), mu, sigma, and when want_trace: e, token_end (n+1,), tokens_in (n+1, P+4),
      z (L+1, n+1, d) layer inputs (z[L] = last layer output), att (L, H, n+1, n+1)
      (rows = query tokens, masked entries 0), tx/3: lin_in (R,) the linear path's input
      r_i = xn_{t-R+1+i} - xn_t (steps before p0 take xn_{p0})."""
    m, w = model, model.w
    P, d, H, L = m.P, m.d, m.H, m.L
    dk = d // H
    e = boundary(t, P)
    if e - P + 1 < p0:
        return None
    x = np.asarray(x, dtype=np.float64)
    mu, sigma = norm_stats(x, p0, e, m.M, float(w["norm.floor"][f]) if m.R else None)

    ends = token_ends(m, p0, t)
    n = len(ends) - 1
    tok_in = np.empty((n + 1, P + 4))
    for i, q in enumerate(ends):
        tok_in[i, :P] = (x[q - P + 1 - p0:q + 1 - p0] - mu) / sigma
        tok_in[i, P:] = time_features(q, m.S, m.tz)
    z = tok_in @ w["embed.weight"].T + w["embed.bias"] + w["channel_embed.weight"][f]
    z = z + np.stack([pos_encoding(q / P, d) for q in ends])

    mask = attention_mask(n)
    zs, atts = [z], []
    for l in range(L):
        pre = "layers.%d." % l
        lin = lambda name, v: v @ w[pre + name + ".weight"].T + w[pre + name + ".bias"]  # noqa: E731
        q, k, v = lin("attn.q_proj", z), lin("attn.k_proj", z), lin("attn.v_proj", z)
        heads = np.empty((n + 1, d))
        att_l = np.zeros((H, n + 1, n + 1))
        for h in range(H):
            cs = slice(h * dk, (h + 1) * dk)
            s = q[:, cs] @ k[:, cs].T / math.sqrt(dk)
            s = np.where(mask, s, -np.inf)
            s = s - s.max(axis=1, keepdims=True)
            a = np.where(mask, np.exp(s), 0.0)
            a /= a.sum(axis=1, keepdims=True)
            att_l[h] = a
            heads[:, cs] = a @ v[:, cs]
        a_out = lin("attn.o_proj", heads)
        z1 = layer_norm(z + a_out, w[pre + "norm1.weight"], w[pre + "norm1.bias"])
        ff = lin("ffn.down", np.maximum(lin("ffn.up", z1), 0.0))
        z = layer_norm(z1 + ff, w[pre + "norm2.weight"], w[pre + "norm2.bias"])
        zs.append(z)
        atts.append(att_l)

    y = (w["head.weight"] @ z[n] + w["head.bias"]).reshape(m.Hz, 2)
    out = {"y": y, "mu": mu, "sigma": sigma}
    if m.R:  # step 6, tx/3: the linear path on the change from the last value
        steps = np.maximum(np.arange(t - m.R + 1, t + 1), p0)
        xn = (x[steps - p0] - mu) / sigma
        xn_t = (x[t - p0] - mu) / sigma
        r = xn - xn_t
        y[:, 0] += w["linear.weight"] @ r + w["linear.bias"] + xn_t
        if want_trace:
            out["lin_in"] = r
    if want_trace:
        out.update(e=e, token_end=np.array(ends, dtype=np.int64), tokens_in=tok_in,
                   z=np.stack(zs), att=np.stack(atts))
    return out


def forecast_units(model, f, res, z_c=1.2815516):
    """Mean, sd and the central interval in the channel's units (spec step 7)."""
    mean = res["y"][:, 0] * res["sigma"] + res["mu"]
    sd = np.exp(res["y"][:, 1]) * res["sigma"]
    if model.R:
        sd = sd * model.w["calib.sigma_scale"][f]
    return mean, sd, mean - z_c * sd, mean + z_c * sd
