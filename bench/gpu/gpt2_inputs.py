"""The GPU machine's inputs for ds's GPT-2-small run: the model's initial weights (built under
torch.manual_seed(0), as exported here; 500 MB, so made there, not carried) as safetensors, tied
weights once, and a random token file (nanoGPT's uint16 .bin) of STEPS x BATCH windows.
usage: gpt2_inputs.py OUT_DIR STEPS BATCH"""
import json
import struct
import sys

import numpy as np

from gpt2_model import SEQ, VOCAB, gpt2_small


def save_f32_safetensors(tensors, path):
    """The safetensors format (a little-endian u64 header size, the JSON header, the data),
    written here so that no package beyond torch and numpy is needed."""
    header, arrays, at = {}, [], 0
    for name, t in tensors.items():
        a = t.detach().float().contiguous().numpy()
        header[name] = {'dtype': 'F32', 'shape': list(a.shape), 'data_offsets': [at, at + a.nbytes]}
        arrays.append(a)
        at += a.nbytes
    text = json.dumps(header).encode()
    text += b' ' * (-len(text) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(text)) + text)
        for a in arrays:
            f.write(a.tobytes())

out, steps, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
seen, tensors = set(), {}
for name, t in gpt2_small().state_dict().items():
    if t.data_ptr() in seen:  # a tied weight: one tensor, found by either name
        continue
    seen.add(t.data_ptr())
    tensors[name] = t.contiguous()
save_f32_safetensors(tensors, out + '/weights.safetensors')
rng = np.random.RandomState(0)
rng.randint(0, VOCAB, size=steps * batch * SEQ + 1).astype(np.uint16).tofile(out + '/tokens.bin')
