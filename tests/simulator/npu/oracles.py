"""Independent formulas (test oracles) for the npu ops that are adapters over GE kernels: the math their eager
kernels computed before they became adapters (issue 32), kept here so that the tests still compare the product
code against something that is not itself. float32 inside for 16-bit inputs, rounded once to the output dtype."""
import math

import torch


def _wide(t):
    return t.float() if t.dtype in (torch.float16, torch.bfloat16) else t


def rms_norm(x, gamma, epsilon=1e-6):
    dims = list(range(x.dim() - gamma.dim(), x.dim()))
    wide = _wide(x).float()
    rstd = (torch.rsqrt(wide.pow(2).mean(dim=dims, keepdim=True) + epsilon) if dims
            else torch.rsqrt(wide.pow(2) + epsilon))
    return (wide * rstd * _wide(gamma).float()).to(x.dtype), rstd


def add_rms_norm(x1, x2, gamma, epsilon=1e-6):
    x = (_wide(x1).float() + _wide(x2).float()).to(x1.dtype)
    y, rstd = rms_norm(x, gamma, epsilon)
    return y, rstd, x


def rotate(x, mode):
    """x_rotate of the rotary modes ("interleave-half": the half rotation of the de-interleaved x)."""
    if mode in ("half", "interleave-half"):
        first, second = x.chunk(2, dim=-1)
        return torch.cat((-second, first), dim=-1)
    if mode == "interleave":
        return torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)
    q0, q1, q2, q3 = x.chunk(4, dim=-1)
    return torch.cat((-q1, q0, -q3, q2), dim=-1)


def rotary_mul(x, r1, r2, mode="half", rotate_matrix=None):
    wide = _wide(x).float()
    if rotate_matrix is not None:
        rotated = wide @ _wide(rotate_matrix).float()
    else:
        if mode == "interleave-half":
            wide = torch.cat((wide[..., ::2], wide[..., 1::2]), dim=-1)
        rotated = rotate(wide, mode)
    return (wide * _wide(r1).float() + rotated * _wide(r2).float()).to(x.dtype)


def swiglu(x, dim=-1):
    a, b = _wide(x).float().chunk(2, dim=dim)
    return (a * torch.sigmoid(a) * b).to(x.dtype)


def gelu(x, approximate="none"):
    return torch.nn.functional.gelu(_wide(x).float(), approximate=approximate).to(x.dtype)


def linear(x, weight, bias=None):
    out = _wide(x).float() @ _wide(weight).float().t()
    return (out if bias is None else out + _wide(bias).float()).to(x.dtype)


def rms_norm_backward(dy, x, gamma, rstd):
    lead = list(range(x.dim() - gamma.dim()))
    dims = list(range(x.dim() - gamma.dim(), x.dim()))
    rstd = rstd.reshape(tuple(x.shape[:len(lead)]) + (1,) * gamma.dim()).float()
    g = _wide(dy).float() * _wide(gamma).float()
    normalized = _wide(x).float() * rstd
    dx = rstd * (g - normalized * (g * normalized).mean(dim=dims, keepdim=True))
    dgamma = _wide(dy).float() * normalized
    return dx.to(x.dtype), (dgamma.sum(dim=lead) if lead else dgamma).float()


def swiglu_backward(grad, x, dim=-1):
    a, b = _wide(x).float().chunk(2, dim=dim)
    g, s = _wide(grad).float(), torch.sigmoid(a)
    return torch.cat((g * b * s * (1 + a * (1 - s)), g * a * s), dim=dim).to(x.dtype)


def gelu_backward(grad, x, approximate="none"):
    w, g = _wide(x).float(), _wide(grad).float()
    if approximate == "none":
        local = 0.5 * (1 + torch.erf(w / math.sqrt(2))) + w * torch.exp(-0.5 * w * w) / math.sqrt(2 * math.pi)
    else:
        k = math.sqrt(2 / math.pi)
        t = torch.tanh(k * (w + 0.044715 * w ** 3))
        local = 0.5 * (1 + t) + 0.5 * w * (1 - t * t) * k * (1 + 3 * 0.044715 * w * w)
    return (g * local).to(x.dtype)


def group_norm_silu(x, gamma, beta, groups, eps):
    wide = x.float()
    normed = torch.nn.functional.group_norm(wide, groups, gamma.float(), beta.float(), eps)
    variance, mean = torch.var_mean(wide.reshape(x.shape[0], groups, -1), dim=-1, unbiased=False)
    return (torch.nn.functional.silu(normed).to(x.dtype), mean.to(gamma.dtype),
            torch.rsqrt(variance + eps).to(gamma.dtype))


def kv_rmsnorm_rope(kv, gamma, cos, sin, v=None, epsilon=1e-5):
    """(k_rope, c_kv) of KvRmsNormRopeCache (npu_kv_rmsnorm_rope_cache's eager kernel before issue 32): V1 (v None)
    splits kv [B, 1, S, D] into the RMS-normed part Dv = gamma's size and the roped rest; V2 (v given) norms all
    of kv, ropes its first cos.shape[-1] dims, passes the rest on, and c_kv = v. The interleaved rope:
    cat(x[::2], x[1::2]) * cos + cat(-x[1::2], x[::2]) * sin."""
    wide = _wide(kv).float()

    def rms(x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + epsilon) * _wide(gamma).float()

    def interleave_rope(x):
        evens, odds = x[..., ::2], x[..., 1::2]
        return (torch.cat((evens, odds), -1) * _wide(cos).float()
                + torch.cat((-odds, evens), -1) * _wide(sin).float())

    if v is None:
        dv = gamma.shape[0]
        return interleave_rope(wide[..., dv:]).to(kv.dtype), rms(wide[..., :dv]).to(kv.dtype)
    rope = cos.shape[-1]
    normed = rms(wide)
    return torch.cat((interleave_rope(normed[..., :rope]), normed[..., rope:]), -1).to(kv.dtype), v.clone()
