# One place for the version numbers.
# weft's own release:
set(WEFT_VERSION "0.1.0")
# The NCCL release whose API/ABI weft provides (ncclGetVersion, the header, the SONAME).
set(WEFT_NCCL_MAJOR 2)
set(WEFT_NCCL_MINOR 28)
set(WEFT_NCCL_PATCH 9)
math(EXPR WEFT_NCCL_VERSION_CODE "${WEFT_NCCL_MAJOR} * 10000 + ${WEFT_NCCL_MINOR} * 100 + ${WEFT_NCCL_PATCH}")
