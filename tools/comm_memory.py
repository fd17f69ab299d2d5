#!/usr/bin/env python3
# Device memory one communicator costs, as a user sees it: free memory (cudaMemGetInfo, through
# PyTorch) before torch.distributed's NCCL backend is set up and after its first all_reduce, on one
# GPU with a world of one (so no connection buffers: the fixed cost of a communicator, kernels'
# stack reservation included). Run it once per library:
#   LD_PRELOAD=/path/to/libnccl.so.2 python3 tools/comm_memory.py [label]
# Prints "<label>: <MiB> MiB (all_reduce ok|WRONG)"; the label defaults to LD_PRELOAD, which says
# which library ran (weft and NCCL both report version 2.28.9). Needs PyTorch with CUDA.
import os
import sys

import torch
import torch.distributed as dist

label = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("LD_PRELOAD", "default")
os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29561")
dev = torch.device("cuda", 0)
torch.cuda.set_device(dev)
x = torch.ones(1024, device=dev)  # the CUDA context and PyTorch's allocator exist before the probe
torch.cuda.synchronize()
free0 = torch.cuda.mem_get_info(dev)[0]
dist.init_process_group("nccl", rank=0, world_size=1, device_id=dev)
dist.all_reduce(x)
torch.cuda.synchronize()
free1 = torch.cuda.mem_get_info(dev)[0]
ok = bool(torch.all(x == 1).item())
print("%s: %.1f MiB (all_reduce %s)" % (label, (free0 - free1) / 2**20, "ok" if ok else "WRONG"))
dist.destroy_process_group()
