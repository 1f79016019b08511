"""Reading ds-run's --trace (a Chrome trace): shared by bench/train_gpt.py and
bench/gpu/trace_top.py."""


def kernel_self_us(events):
    """[(kernel span, its own time in us)]: a kernel that calls another (linear_grad_weight
    sums its bias gradient with dsrt_reduce) holds that call's span inside its own on the same
    stream, which Perfetto draws nested; summing durations would count the inner one twice."""
    kernels = sorted((e for e in events if e.get('cat') == 'kernel'),
                     key=lambda e: (e['pid'], e['tid'], e['ts'], -e['dur']))
    own, stack = {}, []
    for e in kernels:
        if stack and (stack[-1]['pid'], stack[-1]['tid']) != (e['pid'], e['tid']):
            stack = []
        while stack and e['ts'] >= stack[-1]['ts'] + stack[-1]['dur']:
            stack.pop()
        own[id(e)] = e['dur']
        if stack:
            own[id(stack[-1])] -= e['dur']
        stack.append(e)
    return [(e, own[id(e)]) for e in kernels]
