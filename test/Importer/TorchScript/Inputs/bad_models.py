"""Writes TorchScript archives that ds-opt must reject with a clear error.

usage: /usr/bin/python3 bad_models.py OUTDIR
"""
import os
import sys

import torch
import torch.nn.functional as F


class Unsupported(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x, y):
        h = torch.cumprod(self.fc(x), dim=1)  # no ds op for cumprod
        return F.cross_entropy(h, y)


class Logits(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x)  # not a scalar loss


class DataDependent(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x, y):
        h = self.fc(x)
        if bool(h.sum() > 0):  # control flow on tensor data
            h = h * 2
        return F.cross_entropy(h, y)


class IntegerProduct(torch.nn.Module):
    """A matrix product of integer data, which PyTorch computes and ds does not import."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x, y):
        counts = torch.matmul(y.unsqueeze(1), y.unsqueeze(0))  # int64 x int64
        return F.cross_entropy(self.fc(x) + counts.sum(), y)


class MaskIndex(torch.nn.Module):
    """x[mask]: as many rows as the mask has True, which depends on the data."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x, y):
        return self.fc(x)[y > 0].sum()


class ApartIndex(torch.nn.Module):
    """x[i, :, j]: index tensors on dimensions that are not adjacent."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3, 4, 5))

    def forward(self, x, y):
        return self.w[y, :, y].sum() + x.sum()


def main(out):
    torch.manual_seed(0)
    os.makedirs(out, exist_ok=True)
    torch.jit.save(torch.jit.script(Unsupported()), os.path.join(out, "unsupported.pt"))
    torch.jit.save(torch.jit.script(Logits()), os.path.join(out, "logits.pt"))
    torch.jit.save(torch.jit.script(DataDependent()), os.path.join(out, "data_dependent.pt"))
    traced = torch.jit.trace(IntegerProduct(), (torch.randn(2, 4), torch.tensor([0, 2])))
    torch.jit.save(traced, os.path.join(out, "integer_product.pt"))
    torch.jit.save(torch.jit.script(MaskIndex()), os.path.join(out, "mask_index.pt"))
    torch.jit.save(torch.jit.script(ApartIndex()), os.path.join(out, "apart_index.pt"))
    frozen = torch.jit.freeze(torch.jit.script(Unsupported().eval()))
    torch.jit.save(frozen, os.path.join(out, "frozen.pt"))


if __name__ == "__main__":
    main(sys.argv[1])
