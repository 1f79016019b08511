"""Writes PyTorch 2.x model files that ds must refuse, each with a clear message (and two
BatchNorm programs whose buffer updates it must import).

Usage: .venv/bin/python bad_models2.py OUTDIR
"""
import io
import json
import os
import sys
import warnings
import zipfile

import torch
import torch.nn as nn
import torch.nn.functional as F

warnings.filterwarnings('ignore')


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(F.gelu(self.fc(x)), y)


class DataCumsum(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self.fc(torch.cumprod(x, 1)), y)


class WithBatchNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.bn = nn.BatchNorm1d(3)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self.bn(self.fc(x)), y)


class BadOps(nn.Module):
    """Scripted (not run): forwards PyTorch saves but ds must refuse, picked by `which`."""

    def __init__(self, which: int):
        super().__init__()
        self.which = which
        self.fc = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)
        q = h.view(1, 1, 2, 3)
        if self.which == 0:  # both an attention mask and is_causal
            h = F.scaled_dot_product_attention(q, q, q, attn_mask=torch.ones(2, 2),
                                               is_causal=True).view(2, 3)
        elif self.which == 1:  # 3 query heads over 2 key/value heads without enable_gqa
            k = h.view(1, 2, 1, 3)
            h = F.scaled_dot_product_attention(h.view(1, 3, 2, 1).expand(1, 3, 2, 3), k,
                                               k).sum(1)
        elif self.which == 2:  # & on integer tensors
            h = h + (y & y).unsqueeze(1).float()
        elif self.which == 3:  # gather whose index differs outside its dimension
            h = h + torch.gather(h, 1, torch.zeros(1, 3, dtype=torch.long))[0]
        elif self.which == 4:  # a padding mode other than constant
            h = F.pad(h.unsqueeze(0), (1, 1), mode='reflect')[0, :, 1:4]
        elif self.which == 5:  # repeat_interleave without a dim (the flattened form)
            h = torch.repeat_interleave(h, 2)[:6].view(2, 3)
        elif self.which == 6:  # rms_norm with a weight of the wrong size
            h = F.rms_norm(h, [3], torch.ones(4))
        elif self.which == 7:  # topk along a dimension other than the last
            h = h + torch.topk(h, 1, dim=0)[0]
        elif self.which == 8:  # topk of more elements than a row has
            h = h + torch.topk(h, 5)[0].sum()
        else:  # histc over the data's range (min == max)
            h = h + torch.histc(h, bins=3).sum()
        return F.cross_entropy(h, y)


def rewrite(src, dst, edit):
    """Copies zip `src` to `dst`, passing each member's (name, bytes) through `edit`."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, 'w', zipfile.ZIP_STORED) as zout:
        for item in zin.infolist():
            zout.writestr(item.filename, edit(item.filename, zin.read(item.filename)))


def main(out):
    torch.manual_seed(0)
    args = (torch.randn(2, 4), torch.tensor([0, 2]))
    small = Small().train()
    torch.jit.save(torch.jit.script(small), os.path.join(out, 'small.pt'))
    torch.export.save(torch.export.export(small, args), os.path.join(out, 'small.pt2'))
    # A newer producer: the archive's format version beyond what LibTorch 2.15 reads.
    rewrite(os.path.join(out, 'small.pt'), os.path.join(out, 'newer.pt'),
            lambda n, b: b'99\n' if n.endswith('/version') and '/code/' not in n else b)
    # A newer export schema.
    def newer_schema(n, b):
        if n.endswith('models/model.json'):
            d = json.loads(b)
            d['schema_version'] = {'major': 9, 'minor': 0}
            return json.dumps(d).encode()
        return b
    rewrite(os.path.join(out, 'small.pt2'), os.path.join(out, 'newer.pt2'), newer_schema)
    # An operator this LibTorch does not have, in either format.
    rewrite(os.path.join(out, 'small.pt2'), os.path.join(out, 'unknown_op.pt2'),
            lambda n, b: b.replace(b'torch.ops.aten.gelu.default', b'torch.ops.aten.frobnicate.default')
            if n.endswith('models/model.json') else b)
    rewrite(os.path.join(out, 'small.pt'), os.path.join(out, 'unknown_op.pt'),
            lambda n, b: b.replace(b'torch.gelu(', b'torch.frobnicate(')
            if n.endswith('.py') else b)
    # An op ds does not import, on data.
    cum = DataCumsum().train()
    torch.export.save(torch.export.export(cum, args), os.path.join(out, 'unsupported.pt2'))
    # A forward that updates buffers (BatchNorm's running statistics in training mode): in
    # place in the training IR, as buffer-mutation outputs after run_decompositions().
    bn = WithBatchNorm().train()
    ep = torch.export.export(bn, args)
    torch.export.save(ep, os.path.join(out, 'batchnorm.pt2'))
    torch.export.save(ep.run_decompositions(), os.path.join(out, 'batchnorm_core.pt2'))
    # A frozen parameter (requires_grad=False) stays frozen.
    frozen = Small().train()
    frozen.fc.bias.requires_grad_(False)
    torch.export.save(torch.export.export(frozen, args), os.path.join(out, 'frozen.pt2'))
    for which, name in enumerate(['causal_and_mask', 'gqa', 'int_and', 'gather', 'reflect',
                                  'repeat_flat', 'rms_weight', 'topk_dim', 'topk_k',
                                  'histc_range']):
        torch.jit.save(torch.jit.script(BadOps(which)), os.path.join(out, name + '.pt'))
    # Programs another producer could write: two programs, a non-tensor input, a weight the
    # archive lacks.
    # Two programs, neither named 'model'.
    with zipfile.ZipFile(os.path.join(out, 'small.pt2')) as zin, \
            zipfile.ZipFile(os.path.join(out, 'unnamed.pt2'), 'w') as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename.endswith('models/model.json'):
                folder = item.filename[:-len('model.json')]
                zout.writestr(folder + 'first.json', data)
                zout.writestr(folder + 'second.json', data)
            else:
                zout.writestr(item.filename, data)

    def program_edit(edit):
        def f(n, b):
            if n.endswith('models/model.json'):
                d = json.loads(b)
                edit(d)
                return json.dumps(d).encode()
            return b
        return f

    def int_input(d):
        for spec in d['graph_module']['signature']['input_specs']:
            if 'user_input' in spec and spec['user_input']['arg']['as_tensor']['name'] == 'y':
                spec['user_input']['arg'] = {'as_int': 3}
    rewrite(os.path.join(out, 'small.pt2'), os.path.join(out, 'int_input.pt2'),
            program_edit(int_input))

    def lost_weight(d):
        for spec in d['graph_module']['signature']['input_specs']:
            if 'parameter' in spec and spec['parameter']['parameter_name'] == 'fc.bias':
                spec['parameter']['parameter_name'] = 'fc.lost'
    rewrite(os.path.join(out, 'small.pt2'), os.path.join(out, 'lost_weight.pt2'),
            program_edit(lost_weight))
    with open(os.path.join(out, 'small.pt2'), 'rb') as f:
        data = f.read()
    with open(os.path.join(out, 'truncated.pt2'), 'wb') as f:
        f.write(data[:len(data) // 2])


if __name__ == '__main__':
    main(sys.argv[1])
