#!/usr/bin/env python3
"""Regenerate the byte-exact client fixtures in this directory (x86-64/little-endian host).

Each generator reproduces what one existing Cantal client writes, following its source:

python/  cantal 0.2.x (cantal-py, cantal/collection.py): entries sorted by (size, JSON name),
         json.dumps(labels, sort_keys=True) with its defaults (", ", ": ", ensure_ascii),
         power-of-two sizes aligned with "pad N", lines joined by "\n" WITHOUT a final newline;
         values packed with struct 'L', 'l', 'd'; State.enter writes the 8-byte ms timestamp
         and the UTF-8 text plus a NUL when shorter, State.exit zeroes the timestamp only.
rust/    libcantal 0.3: "TYPE SIZE[ PARAM]: JSON\n" with serde_json's compact JSON in the
         order the Name visitor yields keys (not sorted).
go/      cantal-go: "TYPE SIZE: JSON\n" with encoding/json of a map (compact, sorted keys,
         HTML characters escaped as \\u003c), declaration order, no padding.

Run: python3 gen.py   (from this directory)
"""
import json
import os
import struct


def write(d, meta, values):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, 'app.meta'), 'wb') as f:
        f.write(meta.encode('ascii'))
    with open(os.path.join(d, 'app.values'), 'wb') as f:
        f.write(values)


def python_client():
    # (labels, type, size, value)
    metrics = [
        ({'metric': 'requests.number'}, 'counter 8', 8, 97),
        ({'metric': 'requests.duration', 'unit': 'ms'}, 'counter 8', 8, 25191),
        ({'metric': 'queue.length'}, 'level 8 signed', 8, -3),
        ({'metric': 'load'}, 'level 8 float', 8, 0.75),
        ({'metric': 'caf\u00e9', 'group': '\u00fc\U0001F600'}, 'counter 8', 8, 1 << 40),
        ({'metric': 'sql.request'}, 'state 64', 64, (1700000000123, 'SELECT * FROM t')),
        ({'metric': 'job'}, 'state 64', 64, (0, 'finished long ago')),  # entered, then exit()
    ]
    values = sorted(((m[2], json.dumps(m[0], sort_keys=True)), m) for m in metrics)
    offset = 0
    scheme = []
    buf = bytearray()
    for (size, name), (labels, typ, _, value) in values:
        if size & (size - 1) == 0 and offset % size:
            pad = size - offset % size
            offset += pad
            scheme.append('pad {}'.format(pad))
            buf += b'\0' * pad
        scheme.append(typ + ': ' + name)
        if typ == 'counter 8':
            buf += struct.pack('L', value)
        elif typ == 'level 8 signed':
            buf += struct.pack('l', value)
        elif typ == 'level 8 float':
            buf += struct.pack('d', value)
        else:
            ts, text = value
            enc = text.encode('utf-8')[:size - 8]
            if len(enc) < size - 8:
                enc += b'\0'
            chunk = struct.pack('L', ts if ts else 1) + enc
            chunk += b'\0' * (size - len(chunk))
            if not ts:  # exit() zeroes the timestamp and leaves the text
                chunk = b'\0' * 8 + chunk[8:]
            buf += chunk
        offset += size
    write('python', '\n'.join(scheme), bytes(buf))


def rust_client():
    lines = [
        ('counter 8', '{"metric":"requests","group":"web"}', struct.pack('=Q', 12345)),
        ('level 8 signed', '{"metric":"connections"}', struct.pack('=q', 17)),
        ('level 8 float', '{"metric":"cpu.usage","unit":"%"}', struct.pack('=d', 12.5)),
        ('pad 40', None, b'\0' * 40),
        ('state 64', '{"metric":"status"}', struct.pack('=Q', 1600000000000) + b'serving'.ljust(56, b'\0')),
    ]
    meta = ''.join(t + '\n' if j is None else t + ': ' + j + '\n' for t, j, _ in lines)
    write('rust', meta, b''.join(v for _, _, v in lines))


def go_client():
    def gojson(d):  # encoding/json of map[string]string
        s = json.dumps(d, sort_keys=True, separators=(',', ':'), ensure_ascii=False)
        return s.replace('<', '\\u003c').replace('>', '\\u003e').replace('&', '\\u0026')
    lines = [
        ('counter 8', gojson({'metric': 'hits', 'path': '/a<b>&c'}), struct.pack('=Q', 3)),
        ('counter 8', gojson({'metric': 'errors'}), struct.pack('=Q', 0)),
        ('level 8 signed', gojson({'metric': 'goroutines'}), struct.pack('=q', -1)),
    ]
    meta = ''.join('{}: {}\n'.format(t, j) for t, j, _ in lines)
    write('go', meta, b''.join(v for _, _, v in lines))


if __name__ == '__main__':
    python_client()
    rust_client()
    go_client()
