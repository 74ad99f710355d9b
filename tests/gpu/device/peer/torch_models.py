"""torch_models.py -- the model classes the peer getters (vision_models.py,
audio_text_models.py) build, in plain torch: the GPU machine has PyTorch
but no torchvision, torchaudio or torchtext (and may have no scipy), where
PyTorch's benchmark imports its classes from torchvision_models.py and
torchaudio_models.py, copies of those packages' models.

Where they come from: the classes are bench/peers/parity.py's (BasicBlock,
Bottleneck, ResNet50, the bodies of m_resnet18, m_fcn_resnet, m_detr,
m_wav2letter, m_deepspeech, m_transformer), moved to module level with the
benchmark's full sizes (models-spec.md §2, §4) as defaults; parity.py
checked them against fadc's interpreter to 1.2e-7 in f64 (docs/PARITY.md).
What differs from parity.py, to be the benchmark's and not a parity run's:
detr keeps nn.Transformer's dropout 0.1 (train mode, as the benchmark), its
matcher takes the cost matrix to the CPU as the benchmark's does and its
criterion also computes the no-grad class and cardinality errors;
deepspeech's masks are moved to the input's device.  Batch norm never has
running statistics (track_running_stats=False): what
functorch.experimental.replace_all_batch_norm_modules_ leaves, the
benchmark's mode since functorch ships with torch (models-spec.md §1.5).
Parameter names and order are PyTorch's (tests/data/params/*.tsv;
bench/peers/check_torch_peers.py checks them).

linear_sum_assignment is scipy's when scipy imports, else hungarian() here:
the shortest-augmenting-path Hungarian algorithm in numpy (the same
minimum; ties aside, the same assignment)."""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


# ---------------------------------------------------------------- pieces

def bn2d(c):
    # Batch statistics always, no buffers (replace_all_batch_norm_modules_).
    return nn.BatchNorm2d(c, track_running_stats=False)


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = bn2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = bn2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), bn2d(cout))

    def forward(self, x):
        idt = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + idt)


class Bottleneck(nn.Module):
    """torchvision's Bottleneck (v1.5: stride on the 3x3), with dilation."""

    def __init__(self, cin, planes, stride=1, dilation=1, down=False):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
        self.bn1 = bn2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, dilation, dilation, bias=False)
        self.bn2 = bn2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = bn2d(planes * 4)
        self.downsample = None
        if down:
            self.downsample = nn.Sequential(nn.Conv2d(cin, planes * 4, 1, stride, bias=False),
                                            bn2d(planes * 4))

    def forward(self, x):
        idt = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        return F.relu(self.bn3(self.conv3(out)) + idt)


def kaiming_convs_(module):
    # torchvision ResNet's init loop: convs Kaiming normal, fan_out, ReLU
    # gain; BN weight 1, bias 0 (their defaults).
    for m in module.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")


class ResNet50(nn.Module):
    """Stem and layer1..4 of ResNet-50 of base width c (torchvision: 64);
    replace_stride_with_dilation as torchvision's _make_layer applies it."""

    def __init__(self, c=64, dilate=(False, False, False)):
        super().__init__()
        self.conv1 = nn.Conv2d(3, c, 7, 2, 3, bias=False)
        self.bn1 = bn2d(c)
        cin, dil = c, 1
        for k, (n, planes, stride) in enumerate([(3, c, 1), (4, 2 * c, 2), (6, 4 * c, 2),
                                                 (3, 8 * c, 2)]):
            prev = dil
            if k > 0 and dilate[k - 1]:
                dil *= stride
                stride = 1
            blocks = [Bottleneck(cin, planes, stride, prev, down=True)]
            cin = planes * 4
            blocks += [Bottleneck(cin, planes, 1, dil) for _ in range(n - 1)]
            setattr(self, "layer%d" % (k + 1), nn.Sequential(*blocks))
        kaiming_convs_(self)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 3, 2, 1)
        return self.layer4(self.layer3(self.layer2(self.layer1(x))))


# ---------------------------------------------------------------- vision

class ResNet18(nn.Module):
    """torchvision's resnet18 (models-spec.md §2.1)."""

    def __init__(self, c=64, ncls=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, c, 7, 2, 3, bias=False)
        self.bn1 = bn2d(c)
        cin = c
        for k in range(4):
            cout = c << k
            setattr(self, "layer%d" % (k + 1),
                    nn.Sequential(BasicBlock(cin, cout, 1 if k == 0 else 2), BasicBlock(cout, cout)))
            cin = cout
        self.fc = nn.Linear(cin, ncls)
        kaiming_convs_(self)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 3, 2, 1)
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class FCN(nn.Module):
    """torchvision's fcn_resnet50 without the aux classifier (§2.2): returns
    {"out": ...} as torchvision's FCN does."""

    def __init__(self, c=64, ncls=21):
        super().__init__()
        self.backbone = ResNet50(c, dilate=(False, True, True))
        self.classifier = nn.Sequential(nn.Conv2d(32 * c, 8 * c, 3, padding=1, bias=False),
                                        bn2d(8 * c), nn.ReLU(), nn.Dropout(0.1),
                                        nn.Conv2d(8 * c, ncls, 1))

    def forward(self, x):
        y = self.classifier(self.backbone(x))
        return {"out": F.interpolate(y, size=x.shape[-2:], mode="bilinear", align_corners=False)}


class DETR(nn.Module):
    """The benchmark's demo DETR (§2.3): ResNet-50, a 1x1 conv, nn.Transformer
    (dropout 0.1), learned positions; returns pred_logits and pred_boxes."""

    def __init__(self, num_classes=91, hidden_dim=256, nheads=8, num_encoder_layers=6,
                 num_decoder_layers=6, width=64, dim_feedforward=2048, queries=100, npos=50,
                 dropout=0.1):
        super().__init__()
        self.backbone = ResNet50(width)
        self.conv = nn.Conv2d(32 * width, hidden_dim, 1)
        self.transformer = nn.Transformer(hidden_dim, nheads, num_encoder_layers,
                                          num_decoder_layers, dim_feedforward, dropout)
        self.linear_class = nn.Linear(hidden_dim, num_classes + 1)
        self.linear_bbox = nn.Linear(hidden_dim, 4)
        self.query_pos = nn.Parameter(torch.rand(queries, hidden_dim))
        self.row_embed = nn.Parameter(torch.rand(npos, hidden_dim // 2))
        self.col_embed = nn.Parameter(torch.rand(npos, hidden_dim // 2))

    def forward(self, x):
        h = self.conv(self.backbone(x))
        H, W = h.shape[-2:]
        pos = torch.cat([self.col_embed[:W].unsqueeze(0).repeat(H, 1, 1),
                         self.row_embed[:H].unsqueeze(1).repeat(1, W, 1)],
                        dim=-1).flatten(0, 1).unsqueeze(1)
        src = pos + 0.1 * h.flatten(2).permute(2, 0, 1)
        tgt = self.query_pos.unsqueeze(1).repeat(1, x.shape[0], 1)
        hs = self.transformer(src, tgt).transpose(0, 1)
        return {"pred_logits": self.linear_class(hs), "pred_boxes": self.linear_bbox(hs).sigmoid()}


def box_xyxy(b):
    cx, cy, w, h = b.unbind(-1)
    return torch.stack([cx - 0.5 * w, cy - 0.5 * h, cx + 0.5 * w, cy + 0.5 * h], -1)


def generalized_box_iou(a, b):
    # DETR's box_ops: degenerate boxes give inf / nan results, so the
    # benchmark asserts they are well formed (two host syncs).
    assert (a[:, 2:] >= a[:, :2]).all()
    assert (b[:, 2:] >= b[:, :2]).all()
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    lt = torch.max(a[:, None, :2], b[:, :2])
    rb = torch.min(a[:, None, 2:], b[:, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[:, :, 0] * wh[:, :, 1]
    union = area_a[:, None] + area_b - inter
    iou = inter / union
    lt = torch.min(a[:, None, :2], b[:, :2])
    rb = torch.max(a[:, None, 2:], b[:, 2:])
    wh = (rb - lt).clamp(min=0)
    area = wh[:, :, 0] * wh[:, :, 1]
    return iou - (area - union) / area


def hungarian(cost):
    """Minimum-cost assignment of a rectangular matrix (scipy's
    linear_sum_assignment's contract: (row indices ascending, column
    indices)), by the shortest augmenting path method with potentials
    (Kuhn-Munkres in the O(n^2 m) form of Jonker and Volgenant): each row
    of the smaller side is added in turn and a shortest path in reduced
    costs u_i + v_j <= c_ij augments the matching; vectorised over columns."""
    c = np.asarray(cost, dtype=np.float64)
    transposed = c.shape[0] > c.shape[1]
    if transposed:
        c = c.T
    n, m = c.shape
    u = np.zeros(n + 1)
    v = np.zeros(m + 1)
    p = np.zeros(m + 1, dtype=np.int64)    # p[j]: row (1-based) matched to column j, 0 none
    way = np.zeros(m + 1, dtype=np.int64)  # way[j]: previous column on the shortest path
    for i in range(1, n + 1):
        p[0] = i
        j0 = 0
        minv = np.full(m + 1, np.inf)
        used = np.zeros(m + 1, dtype=bool)
        while True:
            used[j0] = True
            i0 = p[j0]
            free = ~used[1:]
            cur = c[i0 - 1] - u[i0] - v[1:]
            better = free & (cur < minv[1:])
            minv[1:][better] = cur[better]
            way[1:][better] = j0
            cand = np.where(free, minv[1:], np.inf)
            j1 = int(np.argmin(cand)) + 1
            delta = cand[j1 - 1]
            cols = np.nonzero(used)[0]
            u[p[cols]] += delta
            v[cols] -= delta
            minv[1:][free] -= delta
            j0 = j1
            if p[j0] == 0:
                break
        while j0:  # augment along the path
            j1 = way[j0]
            p[j0] = p[j1]
            j0 = j1
    cols = np.nonzero(p[1:])[0]
    rows = p[1:][cols] - 1
    if transposed:
        rows, cols = cols, rows
    order = np.argsort(rows, kind="stable")
    return rows[order], cols[order]


try:
    from scipy.optimize import linear_sum_assignment
    HUNGARIAN = "scipy"
except ImportError:
    linear_sum_assignment = hungarian
    HUNGARIAN = "numpy (torch_models.hungarian)"


class SetCriterion(nn.Module):
    """DETR's HungarianMatcher(cost_class 1, cost_bbox 5, cost_giou 2) and
    SetCriterion (losses labels, boxes, cardinality; eos_coef 0.1), §2.3:
    returns the dict of losses; loss_ce, loss_bbox and loss_giou are the
    ones weighted into the benchmark's scalar."""

    def __init__(self, num_classes=91, eos_coef=0.1):
        super().__init__()
        self.num_classes = num_classes
        self.weight_dict = {"loss_ce": 1, "loss_bbox": 5, "loss_giou": 2}
        empty_weight = torch.ones(num_classes + 1)
        empty_weight[-1] = eos_coef
        self.register_buffer("empty_weight", empty_weight)

    @torch.no_grad()
    def match(self, outputs, targets):
        bs, nq = outputs["pred_logits"].shape[:2]
        prob = outputs["pred_logits"].flatten(0, 1).softmax(-1)
        ob = outputs["pred_boxes"].flatten(0, 1)
        ids = torch.cat([t["labels"] for t in targets])
        tb = torch.cat([t["boxes"] for t in targets])
        cost = (5 * torch.cdist(ob, tb, p=1) - prob[:, ids]
                - 2 * generalized_box_iou(box_xyxy(ob), box_xyxy(tb)))
        cost = cost.view(bs, nq, -1).cpu()
        sizes = [len(t["boxes"]) for t in targets]
        idx = [linear_sum_assignment(c[i].numpy()) for i, c in enumerate(cost.split(sizes, -1))]
        return [(torch.as_tensor(i, dtype=torch.int64), torch.as_tensor(j, dtype=torch.int64))
                for i, j in idx]

    def forward(self, outputs, targets):
        indices = self.match(outputs, targets)
        dev = outputs["pred_logits"].device
        bidx = torch.cat([torch.full_like(s, i) for i, (s, _) in enumerate(indices)])
        sidx = torch.cat([s for s, _ in indices])
        logits = outputs["pred_logits"]
        labels_o = torch.cat([t["labels"][j] for t, (_, j) in zip(targets, indices)])
        tc = torch.full(logits.shape[:2], self.num_classes, dtype=torch.int64, device=dev)
        tc[bidx, sidx] = labels_o
        losses = {"loss_ce": F.cross_entropy(logits.transpose(1, 2), tc, self.empty_weight)}
        with torch.no_grad():
            # class_error (top-1 on the matched queries) and cardinality_error:
            # logged by DETR, not in the weighted sum.
            hit = logits[bidx, sidx].argmax(-1).eq(labels_o).float().sum()
            losses["class_error"] = 100 - hit * (100.0 / max(len(labels_o), 1))
            lengths = torch.as_tensor([len(t["labels"]) for t in targets], device=dev)
            card = (logits.argmax(-1) != logits.shape[-1] - 1).sum(1)
            losses["cardinality_error"] = F.l1_loss(card.float(), lengths.float())
        num_boxes = torch.as_tensor([float(sum(len(t["labels"]) for t in targets))], device=dev)
        num_boxes = torch.clamp(num_boxes, min=1).item()
        src = outputs["pred_boxes"][bidx, sidx]
        tgt = torch.cat([t["boxes"][j] for t, (_, j) in zip(targets, indices)])
        losses["loss_bbox"] = F.l1_loss(src, tgt, reduction="none").sum() / num_boxes
        giou = torch.diag(generalized_box_iou(box_xyxy(src), box_xyxy(tgt)))
        losses["loss_giou"] = (1 - giou).sum() / num_boxes
        return losses


# ---------------------------------------------------------------- audio, text

class Wav2Letter(nn.Module):
    """torchaudio's Wav2Letter, waveform input (§4.1)."""

    def __init__(self, num_classes=28, c=250, cw=2000):
        super().__init__()
        body = [nn.Conv1d(c, c, 48, 2, 23), nn.ReLU()]
        for _ in range(7):
            body += [nn.Conv1d(c, c, 7, 1, 3), nn.ReLU()]
        body += [nn.Conv1d(c, cw, 32, 1, 16), nn.ReLU(), nn.Conv1d(cw, cw, 1), nn.ReLU(),
                 nn.Conv1d(cw, num_classes, 1), nn.ReLU()]
        self.acoustic_model = nn.Sequential(
            nn.Sequential(nn.Conv1d(1, c, 250, 160, 45), nn.ReLU()), nn.Sequential(*body))

    def forward(self, x):
        return F.log_softmax(self.acoustic_model(x), dim=1)


class SequenceWise(nn.Module):
    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, x):
        t, b = x.size(0), x.size(1)
        return self.module(x.reshape(t * b, -1)).reshape(t, b, -1)


class BatchRNN(nn.Module):
    def __init__(self, cin, hid, bn):
        super().__init__()
        self.batch_norm = SequenceWise(nn.BatchNorm1d(cin, track_running_stats=False)) \
            if bn else None
        self.rnn = nn.LSTM(cin, hid, bidirectional=True, bias=True)

    def forward(self, x, lens):
        if self.batch_norm is not None:
            x = self.batch_norm(x)
        x = nn.utils.rnn.pack_padded_sequence(x, lens, enforce_sorted=False)
        x, _ = self.rnn(x)
        x, _ = nn.utils.rnn.pad_packed_sequence(x)
        return x.view(x.size(0), x.size(1), 2, -1).sum(2)


class MaskConv(nn.Module):
    def __init__(self, seq):
        super().__init__()
        self.seq_module = seq

    def forward(self, x, lens):
        for m in self.seq_module:
            x = m(x)
            # The benchmark's per-sample loop: the mask is built on the CPU
            # and copied to the device after every module.
            mask = torch.zeros(x.shape, dtype=torch.bool)
            for i, length in enumerate(lens.tolist()):
                if x.size(3) - length > 0:
                    mask[i].narrow(2, length, x.size(3) - length).fill_(True)
            x = x.masked_fill(mask.to(x.device), 0)
        return x


class DeepSpeech(nn.Module):
    """deepspeech.pytorch's DeepSpeech2 as the benchmark builds it (§4.2):
    LSTM, hidden 1024, 5 bidirectional layers, 10 classes, train mode (its
    inference softmax is the identity)."""

    def __init__(self, num_classes=10, hid=1024, c=32, freq=161):
        super().__init__()
        f1 = (freq + 2 * 20 - 41) // 2 + 1
        f2 = (f1 + 2 * 10 - 21) // 2 + 1
        self.conv = MaskConv(nn.Sequential(
            nn.Conv2d(1, c, (41, 11), (2, 2), (20, 5)), bn2d(c), nn.Hardtanh(0, 20),
            nn.Conv2d(c, c, (21, 11), (2, 1), (10, 5)), bn2d(c), nn.Hardtanh(0, 20)))
        self.rnns = nn.Sequential(*[BatchRNN(c * f2 if k == 0 else hid, hid, k > 0)
                                    for k in range(5)])
        self.fc = nn.Sequential(SequenceWise(nn.Sequential(
            nn.BatchNorm1d(hid, track_running_stats=False), nn.Linear(hid, num_classes, bias=False))))

    def forward(self, x, lengths):
        lens = lengths.cpu().int()
        for m in self.conv.seq_module:
            if isinstance(m, nn.Conv2d):
                lens = ((lens + 2 * m.padding[1] - m.dilation[1] * (m.kernel_size[1] - 1) - 1)
                        / m.stride[1] + 1)
        lens = lens.int()
        x = self.conv(x, lens)
        b, ch, fr, t = x.shape
        x = x.view(b, ch * fr, t).transpose(1, 2).transpose(0, 1).contiguous()
        for rnn in self.rnns:
            x = rnn(x, lens)
        x = self.fc(x)
        return x.transpose(0, 1), lens


class TransformerModel(nn.Module):
    """word_language_model's TransformerModel (§4.3); registration order
    gives the parameter order: transformer_encoder, encoder, decoder."""

    def __init__(self, ntoken=50, ninp=720, nhead=12, nhid=2048, nlayers=2, dropout=0.5,
                 maxlen=5000):
        super().__init__()
        pe = torch.zeros(maxlen, ninp)
        position = torch.arange(0, maxlen, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, ninp, 2).float() * (-math.log(10000.0) / ninp))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe.unsqueeze(0).transpose(0, 1))
        self.drop = nn.Dropout(dropout)
        layer = nn.TransformerEncoderLayer(ninp, nhead, nhid, dropout)
        self.transformer_encoder = nn.TransformerEncoder(layer, nlayers, enable_nested_tensor=False)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.decoder = nn.Linear(ninp, ntoken)
        self.ninp = ninp
        self.src_mask = None
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)

    def forward(self, src):
        if self.src_mask is None or self.src_mask.size(0) != len(src):
            # Built once, as the benchmark's model caches it: 0 on and
            # below the diagonal, -inf above.
            keep = torch.tril(torch.ones(len(src), len(src), dtype=torch.bool))
            mask = torch.zeros(len(src), len(src)).masked_fill(~keep, float("-inf"))
            self.src_mask = mask.to(src.device)
        x = self.encoder(src) * math.sqrt(self.ninp)
        x = self.drop(x + self.pe[: x.size(0), :])
        x = self.transformer_encoder(x, self.src_mask)
        return F.log_softmax(self.decoder(x), dim=-1)
