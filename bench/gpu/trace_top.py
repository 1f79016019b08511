"""Where a traced step's time goes, from a ds --trace file (Chrome trace) of one step: the
step, the driver's phases, the kernels' own time by runtime call and by ds op (model line),
copies and waits. On an asynchronous device (CUDA) each traced call waits for the stream,
so the spans are the work's own time plus a launch each.
usage: trace_top.py TRACE.json [TOP=12]"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from trace_spans import kernel_self_us  # noqa: E402


def table(title, totals, counts, top):
    rows = sorted(totals.items(), key=lambda kv: -kv[1])[:top]
    print('| %s | ms | calls |' % title)
    print('|---|---|---|')
    for name, ms in rows:
        print('| %s | %.2f | %d |' % (name, ms, counts[name]))


def main():
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    events = [e for e in json.load(open(path))['traceEvents'] if e['ph'] == 'X']
    steps = [e for e in events if e['name'].startswith('step ')]
    if len(steps) != 1:
        sys.exit('%s: expected the trace of one step, found %d' % (path, len(steps)))
    print('traced %s: %.1f ms' % (steps[0]['name'], steps[0]['dur'] / 1e3))
    driver = [e for e in events if e.get('cat') == 'driver' and e is not steps[0]]
    print('driver phases: ' + ', '.join('%s %.1f ms' % (e['name'], e['dur'] / 1e3)
                                         for e in driver))
    for cat in ('copy', 'wait', 'transfer', 'collective'):
        spans = [e for e in events if e.get('cat') == cat]
        if spans:
            print('%s: %.2f ms in %d spans' % (cat, sum(e['dur'] for e in spans) / 1e3,
                                              len(spans)))
    by_call, by_site, n_call, n_site = {}, {}, {}, {}
    kernels = kernel_self_us(events)
    for e, us in kernels:
        call, site = e['args']['call'], e['args'].get('site', '?')
        by_call[call] = by_call.get(call, 0) + us / 1e3
        n_call[call] = n_call.get(call, 0) + 1
        by_site[site] = by_site.get(site, 0) + us / 1e3
        n_site[site] = n_site.get(site, 0) + 1
    print('kernels: %.1f ms in %d calls' % (sum(by_call.values()), len(kernels)))
    table('runtime call', by_call, n_call, top)
    table('ds op (model line)', by_site, n_site, top)


if __name__ == '__main__':
    main()
