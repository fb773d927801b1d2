// libnnopbase's executor cache for torch_npu (reference/cann_abi.md §6.4), implemented in
// src/nnopbase/pta_cache.cpp. These are the three points where nnopbase.cpp's executor life cycle meets
// it; everything else (the exported PTA* helpers, the per-thread keys and address lists) lives there.
#pragma once
#include <memory>
#include <vector>

#include "fakecann/nn.h"

namespace fakecann::nn {

// What ties an executor to the cache: the entry a phase-1 executor was stored under, or, for the
// executor a cache hit handed out, the entry it runs and the addresses reported for that hit.
struct PtaLink;

// Called by create_executor for every new executor: the link of an executor made for a cache hit, or of
// a phase-1 executor created while the thread had a key set (it is then stored under the key), else null.
std::shared_ptr<PtaLink> pta_link_new_executor(const ExecutorSpec &spec);

// Phase 2, before the kernel is queued: a hit's executor gets the reported addresses bound into `slots`
// (a copy of its spec's slots). Fails when they do not match the executor's tensors.
aclnnStatus pta_before_launch(PtaLink &link, std::vector<Slot> &slots, const char *op);

// Phase 2, after the kernel was queued: a cached entry becomes usable by later lookups.
void pta_after_launch(PtaLink &link);

// True between InitHugeMemThreadLocal and UnInitHugeMemThreadLocal on this thread: an executor made then uses
// huge-page memory, and nnopbase refuses to make it repeatable (opbase op_executor.cpp SetRepeatable).
bool huge_mem_active();

}  // namespace fakecann::nn
