"""audio_text_models.py -- multiheadattn of PyTorch's benchmark, written
with torch functions from models-spec.md §4.4 (torchtext's
MultiheadAttentionContainer is not installed on the GPU machine); the other
models of this module are not provided and raise when asked for."""
import torch
import torch.nn.functional as F


def get_multiheadattn(device):
    embed_dim, nhead, tgt_len, src_len, bsz = 10, 5, 6, 10, 64
    hd = embed_dim // nhead
    lin = lambda: torch.nn.Linear(embed_dim, embed_dim, bias=False).weight.detach()
    params = tuple(lin().to(device).requires_grad_(True) for _ in range(4))
    query = torch.rand((tgt_len, bsz, embed_dim), device=device)
    key = value = torch.rand((src_len, bsz, embed_dim), device=device)
    mask2d = torch.randint(0, 2, (tgt_len, src_len), device=device).to(torch.bool)
    bias = torch.rand((1, 1, embed_dim), device=device)
    attn_mask = torch.stack([mask2d] * (bsz * nhead))
    bias_k = bias_v = bias.repeat(1, bsz, 1).reshape(1, bsz * nhead, -1)

    def forward(wq, wk, wv, wo):
        q = F.linear(query, wq).reshape(tgt_len, bsz * nhead, hd)
        k = F.linear(key, wk).reshape(src_len, bsz * nhead, hd)
        v = F.linear(value, wv).reshape(src_len, bsz * nhead, hd)
        k = torch.cat([k, bias_k])
        v = torch.cat([v, bias_v])
        mask = F.pad(attn_mask, (0, 1))
        q, k, v = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)
        q = q * (float(hd) ** -0.5)
        w = torch.bmm(q, k.transpose(1, 2)).masked_fill(mask, -1e8)
        w = F.softmax(w, dim=-1)
        o = torch.bmm(w, v).transpose(0, 1).reshape(tgt_len, bsz, embed_dim)
        o = F.linear(o, wo)
        return o.sum() + w.sum()

    return forward, params


def _missing(name):
    def get(device):
        raise RuntimeError(f"{name} is not provided on this machine (tests/gpu/device/peer)")
    return get


get_wav2letter = _missing("wav2letter")
get_deepspeech = _missing("deepspeech")
get_transformer = _missing("transformer")
