// The compile-check build's sample of reduction functors (device/functor_sample.h): it must keep
// every data-path shape the kernels distinguish, and a normal build must carry every functor.
#include <gtest/gtest.h>

#include "device/functor_sample.h"
#include "device/kernel_api.h"

using namespace weft;
using namespace weft::dev;

TEST(FunctorSample, KeepsEveryElementSizeAndFunctorShape) {
  bool size[9] = {};
  for (int t = 0; t < kNumDataTypes; ++t)
    if (functorInSample(kRedSum, t)) size[dataTypeBytes((DataType)t)] = true;
  EXPECT_TRUE(size[1] && size[2] && size[4] && size[8]);
  EXPECT_TRUE(functorInSample(kRedPreMulSum, kFloat32));  // preOp with a scalar
  EXPECT_TRUE(functorInSample(kRedSumPostDiv, kUint32));  // postOp
  EXPECT_TRUE(functorInSample(kRedMax, kInt8));           // signed compare, not folded
  EXPECT_FALSE(functorInSample(kRedMax, kUint8));
  // Sum folds signed onto unsigned as the device dispatch does: int8 runs uint8's functor.
  EXPECT_TRUE(functorInSample(kRedSum, kInt8));
  EXPECT_FALSE(functorInSample(kRedProd, kFloat64));
}

TEST(FunctorSample, ANormalBuildSupportsEveryReduction) {
  ASSERT_FALSE(kDeviceFunctorSample) << "unit tests run against a full build";
  for (int op = 0; op < kNumRedOps; ++op) {
    for (int t = 0; t < kNumDataTypes; ++t) {
      const bool exists = op != kRedSumPostDiv || t <= kUint64;
      EXPECT_EQ(isSupported(kFuncAllReduce, kAlgoRing, kProtoSimple, (RedOp)op, (DataType)t), exists)
          << "op " << op << " type " << t;
      EXPECT_TRUE(functorInKernels(op, t));
    }
  }
}
