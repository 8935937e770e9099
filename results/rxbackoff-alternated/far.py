import json,glob,random,statistics as st,os,sys
# comb.py DIR...: s2-64-packed xvswitch far runs (both probes >= 120 ns, under 15 Mpps), base vs hold/final
acc={'base':[], 'new':[]}; dp={'base':[], 'new':[]}
for D in sys.argv[1:]:
  for d in sorted(glob.glob(D+'/*/bench.json')):
    b=os.path.basename(os.path.dirname(d)); name='base' if b.startswith('base') else 'new'
    for c in json.load(open(d))['results']:
        if c['id']!='s2-64-packed': continue
        for r in c['runs']:
            bb,a=r['cross_cpu']['before_ns'],r['cross_cpu']['after_ns']
            if min(a,bb)>=120 and r['mpps']<15:
                (acc if r['system']=='xvswitch' else dp)[name].append(r['mpps'])
x,y=acc['base'],acc['new']
print('xvs far base n=%d med %.2f | new n=%d med %.2f | ratio %.3f'%(len(x),st.median(x),len(y),st.median(y),st.median(y)/st.median(x)))
print('dpdk far base-invocations n=%d med %.2f | new-invocations n=%d med %.2f'%(len(dp['base']),st.median(dp['base']),len(dp['new']),st.median(dp['new'])))
obs=st.median(y)-st.median(x); allv=x+y; random.seed(2); R=20000; cnt=0
for _ in range(R):
    random.shuffle(allv)
    if st.median(allv[len(x):])-st.median(allv[:len(x)])>=obs: cnt+=1
U=sum((a>b)+0.5*(a==b) for a in y for b in x)/len(x)/len(y)
print('one-sided permutation p=%.3f  P(new>base)=%.2f'%(cnt/R,U))
print(' '.join('%.1f'%v for v in sorted(x))); print(' '.join('%.1f'%v for v in sorted(y)))
