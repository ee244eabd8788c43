// Fails to compile on every side, on purpose: what its compile read still decides which findings are listed.
#include <mylib/block_sum.cuh>

static_assert(sizeof(int) == 3, "this unit fails on purpose");
