"""Reads alternated xvs-bench invocations (DIR/<variant>-<N>/bench.json) by the host's state.

python3 state.py split DIR CASE...     each variant's and system's runs: far (both probes at
                                      least 120 ns), near (both under 75 ns), mix
python3 state.py far CASE A B DIR...   xvswitch's far runs (under 15 Mpps) of variants A and B
                                      pooled over DIRs, DPDK's beside them, and a one-sided
                                      permutation test of B's median over A's
"""
import glob, json, os, random, statistics as st, sys


def runs(dirs, case):
    """Yields (variant, system, state, mpps) for every run of case in dirs."""
    for D in dirs:
        for d in sorted(glob.glob(D + '/*/bench.json')):
            v = os.path.basename(os.path.dirname(d)).rsplit('-', 1)[0]
            for c in json.load(open(d))['results']:
                if c['id'] != case:
                    continue
                for r in c['runs']:
                    b, a = r['cross_cpu']['before_ns'], r['cross_cpu']['after_ns']
                    s = 'far' if min(a, b) >= 120 else ('near' if max(a, b) < 75 else 'mix')
                    yield v, r['system'], s, r['mpps']


def split(D, cases):
    for case in cases:
        acc = {}
        for v, system, s, mpps in runs([D], case):
            acc.setdefault((v, system, s), []).append(mpps)
        print(case)
        for k in sorted(acc):
            print('  %-7s %-8s %-4s n=%2d med %6.2f  [%s]' % (k + (len(acc[k]), st.median(acc[k]), ' '.join('%.1f' % x for x in acc[k]))))


def far(case, A, B, dirs):
    acc = {}
    for v, system, s, mpps in runs(dirs, case):
        if s == 'far' and mpps < 15:
            acc.setdefault((v, system), []).append(mpps)
    x, y = acc[(A, 'xvswitch')], acc[(B, 'xvswitch')]
    print('%s far: %s n=%d med %.2f | %s n=%d med %.2f | ratio %.3f' % (case, A, len(x), st.median(x), B, len(y), st.median(y), st.median(y) / st.median(x)))
    da, db = acc[(A, 'dpdk')], acc[(B, 'dpdk')]
    print('  DPDK beside: %s n=%d med %.2f | %s n=%d med %.2f' % (A, len(da), st.median(da), B, len(db), st.median(db)))
    obs, allv, cnt = st.median(y) - st.median(x), x + y, 0
    random.seed(2)
    for _ in range(20000):
        random.shuffle(allv)
        if st.median(allv[len(x):]) - st.median(allv[:len(x)]) >= obs:
            cnt += 1
    print('  one-sided permutation p=%.3f' % (cnt / 20000))


if __name__ == '__main__':
    if sys.argv[1] == 'split':
        split(sys.argv[2], sys.argv[3:])
    else:
        far(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:])
