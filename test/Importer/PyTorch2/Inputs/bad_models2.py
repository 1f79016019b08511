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
        return F.cross_entropy(self.fc(torch.cumsum(x, 1)), y)


class WithBatchNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.bn = nn.BatchNorm1d(3)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self.bn(self.fc(x)), y)


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
    with open(os.path.join(out, 'small.pt2'), 'rb') as f:
        data = f.read()
    with open(os.path.join(out, 'truncated.pt2'), 'wb') as f:
        f.write(data[:len(data) // 2])


if __name__ == '__main__':
    main(sys.argv[1])
