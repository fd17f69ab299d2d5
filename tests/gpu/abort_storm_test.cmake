# Communicators made and aborted over and over at random moments (during creation, while kernels
# wait, from another thread, in a group), one process per rank; public API only. Needs a GPU:
# weft_gpu_abort_storm_test -n 2 -g <gpus> -s <seconds>.
weft_public_api_gpu_test(weft_gpu_abort_storm_test abort_storm_test.cc gpu_abort_storm 300
                         LIBS Threads::Threads ARGS -n 2 -g 1 -s 30)
