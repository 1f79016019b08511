#!/usr/bin/python3
"""Check a safetensors file against the state_dict of a TorchScript archive (or a state_dict
saved with torch.save, STATE.pth).

Usage:
  /usr/bin/python3 check_safetensors.py MODEL.pt|STATE.pth FILE.safetensors
  /usr/bin/python3 check_safetensors.py --self-test

The key sets must be identical and every tensor must match in shape, dtype
and value, compared bitwise (floats are compared through an integer view, so
NaN payloads and -0.0 count too).  Prints one line per problem and exits 1,
or prints "ok: N tensors match" and exits 0.

The safetensors reader is hand-written (no safetensors package needed):
  u64 little-endian N | N bytes of JSON header | raw little-endian data
  header = {name: {"dtype": "F32", "shape": [..], "data_offsets": [b, e]},
            "__metadata__": {str: str}}   (offsets relative to data start)
"""
import json
import os
import struct
import sys
import tempfile

import torch

DTYPES = {
    'F64': torch.float64, 'F32': torch.float32, 'F16': torch.float16,
    'BF16': torch.bfloat16, 'I64': torch.int64, 'I32': torch.int32,
    'I16': torch.int16, 'I8': torch.int8, 'U8': torch.uint8, 'BOOL': torch.bool,
}
NAMES = {v: k for k, v in DTYPES.items()}
# Integer dtype of the same width, used for bitwise comparison.
BITS = {torch.float64: torch.int64, torch.float32: torch.int32,
        torch.float16: torch.int16, torch.bfloat16: torch.int16}


class FormatError(Exception):
    pass


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def read_safetensors(path):
    """Returns (tensors: dict name->Tensor, metadata: dict or None)."""
    if sys.byteorder != 'little':
        raise FormatError('big-endian hosts are not supported')
    with open(path, 'rb') as f:
        raw = f.read()
    if len(raw) < 8:
        raise FormatError('%s: file shorter than 8 bytes' % path)
    (hlen,) = struct.unpack('<Q', raw[:8])
    if 8 + hlen > len(raw):
        raise FormatError('%s: header length %d exceeds file size %d' % (path, hlen, len(raw)))
    try:
        header = json.loads(raw[8:8 + hlen].decode('utf-8'))
    except (UnicodeDecodeError, ValueError) as e:
        raise FormatError('%s: header is not valid JSON: %s' % (path, e))
    if not isinstance(header, dict):
        raise FormatError('%s: header is not a JSON object' % path)
    data = raw[8 + hlen:]
    metadata = header.pop('__metadata__', None)
    if metadata is not None and not (isinstance(metadata, dict) and
                                     all(isinstance(k, str) and isinstance(v, str)
                                         for k, v in metadata.items())):
        raise FormatError('%s: __metadata__ must map strings to strings' % path)
    tensors = {}
    spans = []
    for name, info in header.items():
        if not isinstance(info, dict) or set(info) != {'dtype', 'shape', 'data_offsets'}:
            raise FormatError('%s: entry %r must have exactly dtype, shape, data_offsets; got %r'
                              % (path, name, info))
        dt = info['dtype']
        if dt not in DTYPES:
            raise FormatError('%s: %r: unsupported dtype %r' % (path, name, dt))
        shape = info['shape']
        if not (isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)):
            raise FormatError('%s: %r: bad shape %r' % (path, name, shape))
        offs = info['data_offsets']
        if not (isinstance(offs, list) and len(offs) == 2 and all(isinstance(o, int) for o in offs)):
            raise FormatError('%s: %r: bad data_offsets %r' % (path, name, offs))
        b, e = offs
        dtype = DTYPES[dt]
        nbytes = _numel(shape) * torch.empty((), dtype=dtype).element_size()
        if not (0 <= b <= e <= len(data)):
            raise FormatError('%s: %r: data_offsets [%d, %d] outside data section of %d bytes'
                              % (path, name, b, e, len(data)))
        if e - b != nbytes:
            raise FormatError('%s: %r: data_offsets span %d bytes but %s%s needs %d'
                              % (path, name, e - b, dt, shape, nbytes))
        spans.append((b, e, name))
        buf = bytearray(data[b:e])
        if nbytes:
            t = torch.frombuffer(buf, dtype=dtype).reshape(shape)
        else:
            t = torch.empty(shape, dtype=dtype)
        tensors[name] = t
    spans.sort()
    for (b0, e0, n0), (b1, e1, n1) in zip(spans, spans[1:]):
        if b1 < e0:
            raise FormatError('%s: tensors %r and %r overlap' % (path, n0, n1))
    return tensors, metadata


def write_safetensors(path, tensors, metadata=None, align=8):
    """Minimal writer (for the self-test): tensors in sorted-name order."""
    header = {}
    blobs = []
    off = 0
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        # Go through an integer/uint8 view to get raw bytes for every dtype.
        b = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b''
        header[name] = {'dtype': NAMES[t.dtype], 'shape': list(t.shape),
                        'data_offsets': [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    if metadata is not None:
        header['__metadata__'] = metadata
    h = json.dumps(header, separators=(',', ':')).encode('utf-8')
    h += b' ' * ((-len(h)) % align)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def compare(expected, got):
    """Returns a list of problem strings (empty if everything matches)."""
    problems = []
    for k in sorted(set(expected) - set(got)):
        problems.append('missing in safetensors: %s %s%s' % (
            k, NAMES.get(expected[k].dtype, expected[k].dtype), list(expected[k].shape)))
    for k in sorted(set(got) - set(expected)):
        problems.append('unexpected in safetensors (not in state_dict): %s' % k)
    for k in sorted(set(expected) & set(got)):
        e, g = expected[k].detach().cpu(), got[k]
        if e.dtype != g.dtype:
            problems.append('%s: dtype mismatch: state_dict %s, safetensors %s' % (
                k, NAMES.get(e.dtype, e.dtype), NAMES.get(g.dtype, g.dtype)))
            continue
        if list(e.shape) != list(g.shape):
            problems.append('%s: shape mismatch: state_dict %s, safetensors %s' % (
                k, list(e.shape), list(g.shape)))
            continue
        e = e.contiguous()
        ei, gi = (e.view(BITS[e.dtype]), g.view(BITS[g.dtype])) if e.dtype in BITS else (e, g)
        if not torch.equal(ei, gi):
            diff = (ei != gi).reshape(-1)
            n = int(diff.sum())
            i = int(diff.nonzero()[0])
            problems.append('%s: %d of %d values differ (first at flat index %d: state_dict %r, '
                            'safetensors %r)' % (k, n, e.numel(), i,
                                                 e.reshape(-1)[i].item(), g.reshape(-1)[i].item()))
    return problems


def check(model_path, st_path):
    if model_path.endswith('.pth'):  # a state_dict saved with torch.save (make_models2.py)
        expected = torch.load(model_path, map_location='cpu')
    else:
        expected = torch.jit.load(model_path, map_location='cpu').state_dict()
    try:
        got, _ = read_safetensors(st_path)
    except FormatError as e:
        print('error: %s' % e)
        return 1
    problems = compare(expected, got)
    for p in problems:
        print('mismatch: %s' % p)
    if problems:
        print('FAILED: %d problem(s)' % len(problems))
        return 1
    print('ok: %d tensors match' % len(expected))
    return 0


class _SelfTestModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 5)
        self.emb = torch.nn.Embedding(7, 3)
        self.register_buffer('steps', torch.tensor(42, dtype=torch.int64))
        self.register_buffer('bf16', torch.randn(2, 3).to(torch.bfloat16))
        self.register_buffer('flags', torch.tensor([True, False, True]))
        self.register_buffer('empty', torch.zeros(0, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x)


def self_test():
    torch.manual_seed(0)
    failures = []

    def expect(cond, what):
        print('%s: %s' % ('pass' if cond else 'FAIL', what))
        if not cond:
            failures.append(what)

    with tempfile.TemporaryDirectory() as d:
        mp = os.path.join(d, 'm.pt')
        torch.jit.save(torch.jit.script(_SelfTestModel()), mp)
        sd = torch.jit.load(mp).state_dict()
        sd = {k: v.clone() for k, v in sd.items()}
        st = os.path.join(d, 'm.safetensors')

        def run(tensors, metadata=None):
            write_safetensors(st, tensors, metadata)
            return check(mp, st)

        expect(run(sd, {'format': 'pt'}) == 0, 'exact copy (with __metadata__) accepted')
        rt, md = read_safetensors(st)
        expect(md == {'format': 'pt'}, 'metadata round-trips')
        expect(all(torch.equal(rt[k], sd[k]) for k in sd), 'reader round-trips every dtype')
        expect(rt['steps'].shape == () and rt['empty'].shape == (0, 4), 'scalar/empty shapes')

        bad = dict(sd); del bad['lin.bias']
        expect(run(bad) == 1, 'missing key rejected')
        bad = dict(sd); bad['extra'] = torch.zeros(1)
        expect(run(bad) == 1, 'extra key rejected')
        bad = dict(sd); bad['lin.weight'] = sd['lin.weight'].t().contiguous()
        expect(run(bad) == 1, 'shape mismatch rejected')
        bad = dict(sd); bad['steps'] = sd['steps'].to(torch.int32)
        expect(run(bad) == 1, 'dtype mismatch rejected')
        bad = dict(sd); w = sd['emb.weight'].clone(); w[3, 1] = torch.nextafter(w[3, 1], torch.tensor(1e9))
        bad['emb.weight'] = w
        expect(run(bad) == 1, 'one-ulp value difference rejected')
        bad = dict(sd); w = sd['lin.bias'].clone(); w[0] = 0.0; sd0 = dict(sd)
        sd0['lin.bias'] = w.clone(); w[0] = -0.0
        write_safetensors(st, {**sd0, 'lin.bias': w})
        got, _ = read_safetensors(st)
        expect(len(compare(sd0, got)) == 1, '+0.0 vs -0.0 detected (bitwise)')

        # Malformed files.
        with open(st, 'wb') as f:
            f.write(struct.pack('<Q', 1000) + b'{}')
        expect(check(mp, st) == 1, 'truncated header rejected')
        h = json.dumps({'a': {'dtype': 'F32', 'shape': [2], 'data_offsets': [0, 4]}}).encode()
        with open(st, 'wb') as f:
            f.write(struct.pack('<Q', len(h)) + h + b'\0' * 8)
        expect(check(mp, st) == 1, 'wrong byte span rejected')

    if failures:
        print('self-test FAILED (%d)' % len(failures))
        return 1
    print('self-test ok')
    return 0


def main(argv):
    if len(argv) == 2 and argv[1] == '--self-test':
        return self_test()
    if len(argv) != 3:
        print(__doc__)
        return 2
    return check(argv[1], argv[2])


if __name__ == '__main__':
    sys.exit(main(sys.argv))
