"""audio_text_models.py -- wav2letter, deepspeech, transformer and
multiheadattn of PyTorch's functional_autograd_benchmark, with its getters'
calling convention (vision_models.py says it), at the full sizes of
models-spec.md §4.  The classes are in torch_models.py (plain torch: no
torchaudio or torchtext on the GPU machine); multiheadattn, torchtext's
MultiheadAttentionContainer, is written here with torch functions (§4.4).
deepspeech's batch norm has no running stats (replace_all_batch_norm_modules_),
the transformer is in eval (dropout off), as the benchmark with functorch."""
import torch
import torch.nn.functional as F
from torch import Tensor

import torch_models as models
from utils import GetterReturnType, extract_weights, load_weights


def get_wav2letter(device: torch.device) -> GetterReturnType:
    N = 10
    input_frames = 700
    vocab_size = 28
    model = models.Wav2Letter(num_classes=vocab_size)
    model.to(device)
    params, names = extract_weights(model)

    inputs = torch.rand([N, 1, input_frames], device=device)
    labels = torch.rand(N, 3, device=device).mul(vocab_size).long()

    def forward(*new_params: Tensor) -> Tensor:
        load_weights(model, names, new_params)
        out = model(inputs)
        return F.nll_loss(out, labels)

    return forward, params


def get_deepspeech(device: torch.device) -> GetterReturnType:
    N = 10
    num_classes = 10
    spectrogram_size = 161
    seq_length = 500  # the benchmark's sizes (deepspeech's own: 1343, 50)
    target_length = 10
    labels = torch.rand(num_classes, device=device)  # only its length is used
    inputs = torch.rand(N, 1, spectrogram_size, seq_length, device=device)
    # Each input's length: 400 + 50 U, truncated in the model.
    inputs_sizes = torch.rand(N, device=device).mul(seq_length * 0.1).add(seq_length * 0.8)
    # Float targets as the benchmark draws them; CTC reads them as integers,
    # so every symbol is 0, the blank (models-spec §4.2).
    targets = torch.rand(N, target_length, device=device)
    targets_sizes = torch.full((N,), target_length, dtype=torch.int, device=device)
    model = models.DeepSpeech(num_classes=len(labels), hid=1024, freq=spectrogram_size)
    model = model.to(device)
    params, names = extract_weights(model)

    def forward(*new_params: Tensor) -> Tensor:
        load_weights(model, names, new_params)
        out, out_sizes = model(inputs, inputs_sizes)
        out = out.transpose(0, 1)  # for the CTC loss: (T, N, C)
        return F.ctc_loss(out, targets, out_sizes, targets_sizes, blank=0, reduction="mean")

    return forward, params


def get_transformer(device: torch.device) -> GetterReturnType:
    N = 64
    seq_length = 128
    ntoken = 50
    model = models.TransformerModel(ntoken=ntoken, ninp=720, nhead=12, nhid=2048, nlayers=2)
    model.to(device)
    model.eval()  # the benchmark: "disable dropout for consistency checking"
    params, names = extract_weights(model)

    data = torch.rand(N, seq_length + 1, device=device).mul(ntoken).long()
    inputs = data.narrow(1, 0, seq_length)
    targets = data.narrow(1, 1, seq_length)

    def forward(*new_params: Tensor) -> Tensor:
        load_weights(model, names, new_params)
        out = model(inputs)
        return F.nll_loss(out.reshape(N * seq_length, ntoken), targets.reshape(N * seq_length))

    return forward, params


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

