// NCCL (RCCL after hipify) loaded at run time with dlopen. Each function pointer type is taken from
// the real header with decltype, so a signature mismatch is a compile error, not a crash.
#include <dlfcn.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mutex>

#include "bridge.h"

#ifndef MONARCH_COLLECTIVE_SONAME
#error "the build defines MONARCH_COLLECTIVE_SONAME (e.g. \"libnccl.so.2\")"
#endif

namespace {

#define MR_NCCL_FUNCTIONS(X)                                                                  \
  X(ncclGetVersion) X(ncclGetUniqueId) X(ncclCommInitRank) X(ncclCommDestroy) X(ncclCommAbort) \
  X(ncclCommGetAsyncError) X(ncclGetErrorString) X(ncclAllReduce) X(ncclBroadcast) X(ncclSend) \
  X(ncclRecv) X(ncclGroupStart) X(ncclGroupEnd) X(ncclGetLastError)

struct CollectiveTable {
#define MR_FIELD(name) decltype(&::name) name = nullptr;
  MR_NCCL_FUNCTIONS(MR_FIELD)
#undef MR_FIELD
  void* handle = nullptr;
  char error[512] = {0};
};

// NCCL_VERSION_CODE and ncclGetVersion: major*10000 + minor*100 + patch since 2.9, major*1000 + ... before.
int api_major(int code) { return code >= 10000 ? code / 10000 : code / 1000; }
int api_minor(int code) { return code >= 10000 ? (code % 10000) / 100 : (code % 1000) / 100; }
int api_patch(int code) { return code % 100; }

CollectiveTable& table() {
  static CollectiveTable instance;
  return instance;
}

void load_once(CollectiveTable& t) {
  // MONARCH_COLLECTIVE_LIBRARY (a path or soname) overrides the built-in name, e.g. for tests.
  const char* override_name = getenv("MONARCH_COLLECTIVE_LIBRARY");
  const char* name = (override_name && *override_name) ? override_name : MONARCH_COLLECTIVE_SONAME;
  t.handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!t.handle) {
    snprintf(t.error, sizeof(t.error), "cannot load %s: %s", name, dlerror());
    return;
  }
#define MR_RESOLVE(fn)                                                                        \
  t.fn = reinterpret_cast<decltype(t.fn)>(dlsym(t.handle, #fn));                              \
  if (!t.fn) {                                                                                \
    snprintf(t.error, sizeof(t.error), "%s does not export %s", name, #fn);                   \
    dlclose(t.handle);                                                                        \
    t.handle = nullptr;                                                                       \
    return;                                                                                   \
  }
  MR_NCCL_FUNCTIONS(MR_RESOLVE)
#undef MR_RESOLVE
  // The library must speak the API major version of the header this bridge was compiled against (its
  // types and enum values are baked in here); minor versions within a major are ABI-compatible.
  int version = 0;
  if (t.ncclGetVersion(&version) != ncclSuccess) {
    snprintf(t.error, sizeof(t.error), "%s loaded, but ncclGetVersion failed, so its API version is unknown", name);
  } else if (api_major(version) != api_major(NCCL_VERSION_CODE)) {
    snprintf(t.error, sizeof(t.error),
             "%s speaks the NCCL API %d.%d.%d, but this wheel was built against the %d.%d.%d header: a different "
             "major version is not ABI-compatible; install a matching collective library or a matching wheel",
             name, api_major(version), api_minor(version), api_patch(version), api_major(NCCL_VERSION_CODE),
             api_minor(NCCL_VERSION_CODE), api_patch(NCCL_VERSION_CODE));
  } else {
    return;
  }
  dlclose(t.handle);
  t.handle = nullptr;
}

CollectiveTable* loaded() {
  static std::once_flag once;
  CollectiveTable& t = table();
  std::call_once(once, [&t] { load_once(t); });
  return t.handle ? &t : nullptr;
}

}  // namespace

extern "C" int mr_collective_load(char* error, size_t error_len) {
  if (loaded()) return 0;
  if (error && error_len) {
    strncpy(error, table().error, error_len - 1);
    error[error_len - 1] = '\0';
  }
  return -1;
}

extern "C" const char* mr_collective_soname(void) { return MONARCH_COLLECTIVE_SONAME; }

// Forwarders with the library's own names and signatures, prefixed mr_, so Rust binds them by
// CUDA/NCCL name through rocm_compat. A call before a successful load returns ncclSystemError.
#define MR_FORWARD(ret, fn, params, args)                                                    \
  extern "C" ret mr_##fn params {                                                           \
    CollectiveTable* t = loaded();                                                           \
    if (!t) return ncclSystemError;                                                          \
    return t->fn args;                                                                       \
  }

MR_FORWARD(ncclResult_t, ncclGetVersion, (int* version), (version))
MR_FORWARD(ncclResult_t, ncclGetUniqueId, (ncclUniqueId* id), (id))
MR_FORWARD(ncclResult_t, ncclCommInitRank, (ncclComm_t* comm, int nranks, ncclUniqueId id, int rank),
           (comm, nranks, id, rank))
MR_FORWARD(ncclResult_t, ncclCommDestroy, (ncclComm_t comm), (comm))
MR_FORWARD(ncclResult_t, ncclCommAbort, (ncclComm_t comm), (comm))
MR_FORWARD(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t* result), (comm, result))
MR_FORWARD(ncclResult_t, ncclAllReduce,
           (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
            ncclComm_t comm, cudaStream_t stream),
           (sendbuff, recvbuff, count, datatype, op, comm, stream))
MR_FORWARD(ncclResult_t, ncclBroadcast,
           (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
            ncclComm_t comm, cudaStream_t stream),
           (sendbuff, recvbuff, count, datatype, root, comm, stream))
MR_FORWARD(ncclResult_t, ncclSend,
           (const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
            cudaStream_t stream),
           (sendbuff, count, datatype, peer, comm, stream))
MR_FORWARD(ncclResult_t, ncclRecv,
           (void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
            cudaStream_t stream),
           (recvbuff, count, datatype, peer, comm, stream))
MR_FORWARD(ncclResult_t, ncclGroupStart, (void), ())
MR_FORWARD(ncclResult_t, ncclGroupEnd, (void), ())

// Without a loaded library both answer why it could not be loaded (the reason stays in the table).
extern "C" const char* mr_ncclGetErrorString(ncclResult_t result) {
  CollectiveTable* t = loaded();
  if (!t) return table().error;
  return t->ncclGetErrorString(result);
}

extern "C" const char* mr_ncclGetLastError(ncclComm_t comm) {
  CollectiveTable* t = loaded();
  if (!t) return table().error;
  return t->ncclGetLastError(comm);
}
