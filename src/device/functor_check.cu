// A compile-check build's cover for the functors its kernels leave out (functor_sample.h): one
// kernel that calls every reduction functor's element and pack operations, so that each type's
// arithmetic (the vendor's half, bfloat16 and fp8 code in type_ops.cuh) still compiles. Nothing
// launches it. Empty in a normal build, whose kernels carry every functor.
#include "device/functor_sample.h"
#include "device/reduce/functor_visit.cuh"

#if defined(WEFT_DEVICE_FUNCTOR_SAMPLE)

namespace weft::dev {
namespace {

struct FunctorSurface {
  const DevWork* w;
  Pack16* packs;     // in: [0], [1]; out: [2..5]
  uint64_t* elems;   // the same, one element's bits each
  template <int Op, int Type, typename Fn>
  WEFT_DEV void run() const {
    using T = typename Fn::Elem;
    const Fn fn = Fn::fromWork(*w);
    packs[2] = fn.reduce(packs[0], packs[1]);
    packs[3] = fn.reducePre(packs[0], packs[1]);
    packs[4] = fn.preOp(packs[0]);
    packs[5] = fn.postOp(packs[0]);
    const T a = elemFromBits<T>(elems[0]), b = elemFromBits<T>(elems[1]);
    const T out[4] = {fn.reduce(a, b), fn.reducePre(a, b), fn.preOp(a), fn.postOp(a)};
    for (int i = 0; i < 4; ++i) memcpy(&elems[2 + i], &out[i], sizeof(T));
  }
};

}  // namespace

__global__ void weftFunctorSurface(const DevWork* w, Pack16* packs, uint64_t* elems) {
  visitFunctor(w->redOp, w->dataType, FunctorSurface{w, packs, elems});
}

}  // namespace weft::dev

#endif
