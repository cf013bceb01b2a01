#!/usr/bin/env python3
"""Check candidate 'node iteration' rules against the vendor analyzed_nodes.csv.

Usage: python3 verify_gaudi_nodes.py [corpus_dir]
Reads debug_hw_prof_accel0_001.csv (HW trace) and ..._analyzed_nodes.csv (vendor table),
rebuilds every vendor row from the HW trace under each rule, compares at 3 decimals.
"""
import os
import csv, math, re, sys
from decimal import Decimal as D

corpus = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'shared', 'corpus', 'habana')
HW = f'{corpus}/debug_hw_prof_accel0_001.csv'
AN = f'{corpus}/debug_hw_prof_accel0_001_analyzed_nodes.csv'

ROUND_NS = False

def unit_of(engine):            # "[HD3] TPC 5" -> "TPC", "[HD0] MME" -> "MME"
    m = re.match(r'\[(?:HD|D)\d+\]\s+([A-Za-z]+)', engine)
    return m.group(1) if m else engine

def die_of(engine):
    m = re.match(r'\[(HD\d+)\]', engine)
    return m.group(1) if m else None

# ---- 1. activations: BEGIN paired with the next END on the same engine for the same name
def activations():
    open_, acts = {}, []
    for r in csv.DictReader(open(HW)):
        t = D(r['Timestamp[usec]'])
        if ROUND_NS: t = t.quantize(D('0.001'))   # steplens stores integer ns
        key = (r['Name'], r['Engine'])
        if r['Event type'] == 'BEGIN':
            open_[key] = t
        elif r['Event type'] == 'END' and key in open_:
            acts.append(dict(name=r['Name'], engine=r['Engine'], unit=unit_of(r['Engine']),
                             b=open_.pop(key), e=t))
    return acts

# ---- 2. grouping rules: return list of groups (lists of activations) per (unit, name)
def by_node(acts):
    nodes = {}
    for a in acts:
        nodes.setdefault((a['unit'], a['name']), []).append(a)
    for v in nodes.values():
        v.sort(key=lambda a: (a['b'], a['engine']))
    return nodes

def sweep(seq, close_at_idle):
    """Generic sweep: a new group starts when the engine repeats, or at an idle point
    (next begin >= latest end so far) where close_at_idle(group) is true."""
    groups, cur, max_end, engines = [], [], None, set()
    for a in seq:
        if cur and (a['engine'] in engines or (a['b'] >= max_end and close_at_idle(cur))):
            groups.append(cur); cur, max_end, engines = [], None, set()
        cur.append(a); engines.add(a['engine'])
        max_end = a['e'] if max_end is None else max(max_end, a['e'])
    if cur: groups.append(cur)
    return groups

def rule_steplens(seq, dies):        # current steplens: split at every idle point
    return sweep(seq, lambda g: True)

def rule_vendor_fit(seq, dies):      # split at an idle point only once the group holds k*dies activations
    return sweep(seq, lambda g: len(g) % dies == 0)

# ---- 3. columns
def r3(x):  # vendor prints 3 decimals (then pads to 6)
    return f'{float(x):.3f}'

def union(iv):
    tot, cur_s, cur_e = D(0), None, None
    for s, e in sorted(iv):
        if cur_e is None or s > cur_e:
            if cur_e is not None: tot += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return tot + (cur_e - cur_s if cur_e is not None else 0)

def row_of(unit, g, all_acts):
    start = min(a['b'] for a in g); end = max(a['e'] for a in g)
    per_engine = {}
    for a in g: per_engine[a['engine']] = per_engine.get(a['engine'], D(0)) + (a['e'] - a['b'])
    d = list(per_engine.values()); n = len(d)
    mean = sum(d) / n
    var = sum((x - mean) ** 2 for x in d) / n            # population variance
    active = union([(a['b'], a['e']) for a in g])
    dur = end - start
    # class busy inside [start,end]: union of ALL activations of a class clipped to the window
    def class_busy(cls):
        iv = [(max(a['b'], start), min(a['e'], end)) for a in all_acts
              if a['unit'] == cls and a['e'] > start and a['b'] < end]
        return union(iv)
    other = 'TPC' if unit == 'MME' else 'MME'
    own_iv = [(a['b'], a['e']) for a in g]
    # exposed = own busy time not covered by the other compute class (no DMA in this trace)
    oth_iv = [(a['b'], a['e']) for a in all_acts if a['unit'] == other]
    overlap = union([(max(s, os_), min(e, oe)) for s, e in own_iv for os_, oe in oth_iv if min(e, oe) > max(s, os_)])
    pe = {c: math.floor(100 * class_busy(c) / dur) if dur > 0 else 0 for c in ('MME', 'TPC')}
    return {
        'Start time of node': r3(start), 'End time of node': r3(end),
        'Duration (us)': r3(dur), 'Active (us)': r3(active),
        'Min single engine (us)': r3(min(d)), 'Max single engine (us)': r3(max(d)),
        'Diff max min single engine (us)': r3(max(d) - min(d)),
        'Avg single engine (us)': r3(mean), 'Avg single engine active (us)': r3(mean),
        'Variance single engine (us²)': r3(var),
        'Num activations': str(len(g)), 'Parallel Engines': str(n),
        f'Exposed {unit.lower()} (us)': r3(active - overlap),
        f'Unexposed {unit.lower()} (us)': r3(overlap),
        'MME Parallel Execution (%)': str(pe['MME']), 'TPC Parallel Execution (%)': str(pe['TPC']),
    }

def name_of(base, k):
    return base if k == 0 else f'{base} iter {k + 1}'

def norm(v):
    try: return r3(D(v)) if '.' in v else v
    except Exception: return v

def check(rule, label):
    acts = activations()
    dies = len({die_of(a['engine']) for a in acts if die_of(a['engine'])})
    mine = {}
    for (unit, base), seq in by_node(acts).items():
        for k, g in enumerate(rule(seq, dies)):
            mine[(unit, name_of(base, k))] = row_of(unit, g, acts)
    vendor = list(csv.DictReader(open(AN)))
    ok_rows = cells = ok_cells = 0
    print(f'== {label}: {len(mine)} groups built; dies={dies}')
    for v in vendor:
        got = mine.get((v['Unit'], v['Node Name']))
        if got is None:
            print(f'  MISSING {v["Node Name"]}'); continue
        bad = [(c, v[c], x) for c, x in got.items() if norm(v[c]) != x]
        cells += len(got); ok_cells += len(got) - len(bad)
        ok_rows += not bad
        print(f'  {"OK  " if not bad else "FAIL"} {v["Node Name"]}: {len(got)-len(bad)}/{len(got)} columns'
              + ('' if not bad else f'  diffs={bad[:4]}'))
    extra = len(mine) - len(vendor)
    print(f'  rows matched {ok_rows}/{len(vendor)}, cells {ok_cells}/{cells}, extra groups {extra}')
    return ok_rows, len(vendor)

if __name__ == '__main__':
    for ROUND_NS in (False, True):
        print(f'##### timestamps {"rounded to 1 ns (steplens)" if ROUND_NS else "as written (sub-ns)"}')
        check(rule_steplens, 'steplens rule (split at every idle gap)')
        check(rule_vendor_fit, 'vendor-fit rule (split at idle gap when count % dies == 0)')
    # Which modulus k in "split at an idle gap when count % k == 0" reproduces every row?
    import io, contextlib
    ROUND_NS = False
    good = []
    for k in range(1, 49):
        with contextlib.redirect_stdout(io.StringIO()):
            ok, n = check(lambda seq, d, k=k: sweep(seq, lambda g: len(g) % k == 0), f'mod {k}')
        if ok == n: good.append(k)
    print(f'moduli 1..48 reproducing all rows: {good}')
    # No rule that looks only at idle-gap length can work: list the idle gaps of the TPC node.
    ROUND_NS = False
    seq = by_node(activations())[('TPC', 'g_1_conv_0_tpc_packing')]
    mx, n = None, 0
    for a in seq:
        if mx is not None and a['b'] >= mx:
            print(f'idle gap {float(a["b"] - mx):.6f} us after {n} activations')
        n += 1; mx = a['e'] if mx is None else max(mx, a['e'])
