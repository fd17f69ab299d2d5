import re,sys
# Prints weft/NCCL busbw ratios from a weft-perf log with "### label" blocks (one named nccl), as
# written by tools/gpu_batch.sh: python3 tools/ratio_table.py exp.log
blocks={}; cur=None
ops=["broadcast","reduce","sendrecv","alltoall","all_reduce","all_gather","reduce_scatter"]
for line in open(sys.argv[1]):
    if line.startswith('###'): cur=line[4:].strip(); blocks[cur]=[]; continue
    m=re.match(r'\s+(\d+)\s+\d+\s+\S+\s+\S+\s+-?\d+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)',line)
    if m and cur: blocks[cur].append(float(m.group(4)))
ref=blocks['nccl']
print('%-18s'%'variant'+''.join('%-16s'%o for o in ops))
for k,v in blocks.items():
    row=''
    for i,o in enumerate(ops):
        vals=v[i*3:(i+1)*3]; r=ref[i*3:(i+1)*3]
        row+='%-16s'%('/'.join(('%.0f'%x) if k=='nccl' else ('%.2f'%(x/y)) for x,y in zip(vals,r)))
    print('%-18s'%k+row)
