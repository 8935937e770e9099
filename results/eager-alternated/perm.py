import json,glob,random,statistics as st,os,sys
# perm.py CASE A B DIR...: far runs of xvswitch (and DPDK) for variants A and B pooled over DIRs; permutation test on medians
cid,A,B=sys.argv[1:4]
acc={}
for D in sys.argv[4:]:
  for d in sorted(glob.glob(D+'/*/bench.json')):
    v=os.path.basename(os.path.dirname(d)).rsplit('-',1)[0]
    for c in json.load(open(d))['results']:
      if c['id']!=cid: continue
      for r in c['runs']:
        bb,a=r['cross_cpu']['before_ns'],r['cross_cpu']['after_ns']
        if min(a,bb)>=120 and r['mpps']<15:
          acc.setdefault((v,r['system']),[]).append(r['mpps'])
x,y=acc[(A,'xvswitch')],acc[(B,'xvswitch')]
print('%s far: %s n=%d med %.2f | %s n=%d med %.2f | ratio %.3f'%(cid,A,len(x),st.median(x),B,len(y),st.median(y),st.median(y)/st.median(x)))
print('  DPDK beside: %s n=%d med %.2f | %s n=%d med %.2f'%(A,len(acc[(A,'dpdk')]),st.median(acc[(A,'dpdk')]),B,len(acc[(B,'dpdk')]),st.median(acc[(B,'dpdk')])))
obs=st.median(y)-st.median(x); allv=x+y; random.seed(2); R=20000; cnt=0
for _ in range(R):
    random.shuffle(allv)
    if st.median(allv[len(x):])-st.median(allv[:len(x)])>=obs: cnt+=1
print('  one-sided permutation p=%.3f'%(cnt/R))
