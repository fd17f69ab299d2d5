// Entry points whose features are not built yet. Each still exists (clients resolve every name at
// load time) and answers ncclInvalidUsage with a last-error text naming itself. The README lists
// them; move a name out of here when its feature lands.
#include "api/export.h"

using weft::api::notImplemented;

#define WEFT_PENDING(name, why, ...) \
  WEFT_API(ncclResult_t, name, __VA_ARGS__) { return notImplemented(#name, why); }

WEFT_PENDING(ncclCommWindowRegister, "symmetric windows", ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags)
WEFT_PENDING(ncclCommWindowDeregister, "symmetric windows", ncclComm_t comm, ncclWindow_t win)
