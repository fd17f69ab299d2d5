// ncclGetUniqueId: the id every rank passes to ncclCommInitRank. See bootstrap/unique_id.h.
#include "api/export.h"
#include "bootstrap/unique_id.h"
#include "core/library.h"

WEFT_API(ncclResult_t, ncclGetUniqueId, ncclUniqueId* uniqueId) {
  return weft::api::guard("ncclGetUniqueId", [&]() -> ncclResult_t {
    weft::core::initOnce();
    if (uniqueId == nullptr) {
      WEFT_WARN("ncclGetUniqueId: argument 'uniqueId' is NULL");
      return ncclInvalidArgument;
    }
    return weft::bootstrap::createUniqueId(uniqueId);
  });
}
