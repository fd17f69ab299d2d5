# Soak (reliability matrix row 3): cycles of checked collectives of mixed sizes on several
# communicators (splits, new ones, a CUDA graph), one process per rank, judged for drift in fds,
# threads, resident and GPU memory and latency. Needs a GPU: weft_gpu_soak_test -n 2 -g <gpus> -s <seconds>.
weft_public_api_gpu_test(weft_gpu_soak_test soak_test.cc gpu_soak 400 LIBS Threads::Threads ARGS -n 2 -g 1 -s 120)
