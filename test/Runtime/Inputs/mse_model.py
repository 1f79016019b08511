#!/usr/bin/python3
"""A TorchScript regression model whose loss is not a cross-entropy, and its data:
mse_model.py PREFIX writes PREFIX.pt, PREFIX.x.npy and PREFIX.y.npy."""
import sys

import numpy as np
import torch
import torch.nn.functional as F


class Regression(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 1)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(self.fc(x).squeeze(1), y)


torch.manual_seed(0)
torch.jit.save(torch.jit.script(Regression()), sys.argv[1] + '.pt')
np.save(sys.argv[1] + '.x.npy', np.ones((8, 4), np.float32))
np.save(sys.argv[1] + '.y.npy', np.ones(8, np.float32))
