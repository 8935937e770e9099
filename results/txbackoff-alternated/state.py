import json,glob,random,statistics as st,os,sys
# st.py DIR CASEID...: per variant (dir prefix before '-'), xvswitch/DPDK runs by state (far: both probes>=120, near: both<75)
D=sys.argv[1]
for cid in sys.argv[2:]:
  acc={}
  for d in sorted(glob.glob(D+'/*/bench.json')):
    v=os.path.basename(os.path.dirname(d)).rsplit('-',1)[0]
    for c in json.load(open(d))['results']:
      if c['id']!=cid: continue
      for r in c['runs']:
        bb,a=r['cross_cpu']['before_ns'],r['cross_cpu']['after_ns']
        s='far' if min(a,bb)>=120 else ('near' if max(a,bb)<75 else 'mix')
        acc.setdefault((v,r['system'],s),[]).append(r['mpps'])
  print(cid)
  for k in sorted(acc): print('  %-6s %-8s %-4s n=%2d med %6.2f  [%s]'%(k[0],k[1],k[2],len(acc[k]),st.median(acc[k]),' '.join('%.1f'%x for x in acc[k])))
