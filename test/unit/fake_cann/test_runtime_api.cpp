// Devices, contexts, streams and events of the stand-in against CANN's own runtime (hicann/runtime): each test names
// the file whose behaviour it states.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "acl/acl.h"
#include "acl/acl_dump.h"
#include "acl/acl_rt_allocator.h"
#include "aclnnop/aclnn_add.h"

namespace {

// A host function that holds its stream until released: what is queued behind it stays pending.
struct Gate {
  std::atomic<bool> started{false}, open{false};
  static void hold(void *p) {
    auto *g = static_cast<Gate *>(p);
    g->started = true;
    while (!g->open) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
};

class RuntimeApi : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS); }
  void TearDown() override { aclrtResetDevice(0); }

  void *device_floats(const std::vector<float> &v) {
    void *d = nullptr;
    EXPECT_EQ(aclrtMalloc(&d, v.size() * 4, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    EXPECT_EQ(aclrtMemcpy(d, v.size() * 4, v.data(), v.size() * 4, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
    return d;
  }
  uint8_t first_byte(void *d) {
    uint8_t b = 0xee;
    EXPECT_EQ(aclrtMemcpy(&b, 1, d, 1, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);
    return b;
  }
};

// src/acl/aclrt_impl/event.cpp aclrtQueryEventImpl over src/runtime/core/src/event/event.cc Event::Query: COMPLETE (0)
// when the latest record ran or none was issued, NOT_READY (1) while one is pending.
TEST_F(RuntimeApi, QueryEventIsCompleteZeroAndNotReadyOne) {
  aclrtStream s = nullptr;
  aclrtEvent e = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
  ASSERT_EQ(aclrtCreateEvent(&e), ACL_SUCCESS);
  aclrtEventStatus st = ACL_EVENT_STATUS_RESERVED;
  ASSERT_EQ(aclrtQueryEvent(e, &st), ACL_SUCCESS);
  EXPECT_EQ(st, ACL_EVENT_STATUS_COMPLETE);  // no record yet
  Gate gate;
  ASSERT_EQ(aclrtLaunchHostFunc(s, Gate::hold, &gate), ACL_SUCCESS);
  ASSERT_EQ(aclrtRecordEvent(e, s), ACL_SUCCESS);
  ASSERT_EQ(aclrtQueryEvent(e, &st), ACL_SUCCESS);
  EXPECT_EQ(st, ACL_EVENT_STATUS_NOT_READY);
  EXPECT_EQ((int)st, 1);
  gate.open = true;
  ASSERT_EQ(aclrtSynchronizeEvent(e), ACL_SUCCESS);
  ASSERT_EQ(aclrtQueryEvent(e, &st), ACL_SUCCESS);
  EXPECT_EQ((int)st, 0);
  EXPECT_EQ(aclrtQueryEvent(e, nullptr), ACL_ERROR_INVALID_PARAM);
  aclrtDestroyEvent(e);
  aclrtDestroyStream(s);
}

// event.cpp aclrtQueryEventStatusImpl over Event::QueryEventStatus: RECORDED_STATUS_COMPLETE is 1; before any record an
// event of aclrtCreateEventExWithFlag ("new mode") is COMPLETE, one of aclrtCreateEventWithFlag NOT_READY.
TEST_F(RuntimeApi, QueryEventStatusDependsOnTheEventsMode) {
  aclrtEvent old_mode = nullptr, new_mode = nullptr;
  ASSERT_EQ(aclrtCreateEventWithFlag(&old_mode, ACL_EVENT_SYNC), ACL_SUCCESS);
  ASSERT_EQ(aclrtCreateEventExWithFlag(&new_mode, ACL_EVENT_SYNC), ACL_SUCCESS);
  aclrtEventRecordedStatus st = ACL_EVENT_RECORDED_STATUS_COMPLETE;
  ASSERT_EQ(aclrtQueryEventStatus(old_mode, &st), ACL_SUCCESS);
  EXPECT_EQ(st, ACL_EVENT_RECORDED_STATUS_NOT_READY);
  ASSERT_EQ(aclrtQueryEventStatus(new_mode, &st), ACL_SUCCESS);
  EXPECT_EQ(st, ACL_EVENT_RECORDED_STATUS_COMPLETE);
  EXPECT_EQ((int)ACL_EVENT_RECORDED_STATUS_COMPLETE, 1);
  aclrtStream s = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
  Gate gate;
  ASSERT_EQ(aclrtLaunchHostFunc(s, Gate::hold, &gate), ACL_SUCCESS);
  ASSERT_EQ(aclrtRecordEvent(old_mode, s), ACL_SUCCESS);
  ASSERT_EQ(aclrtQueryEventStatus(old_mode, &st), ACL_SUCCESS);
  EXPECT_EQ(st, ACL_EVENT_RECORDED_STATUS_NOT_READY);
  gate.open = true;
  ASSERT_EQ(aclrtSynchronizeStream(s), ACL_SUCCESS);
  ASSERT_EQ(aclrtQueryEventStatus(old_mode, &st), ACL_SUCCESS);
  EXPECT_EQ(st, ACL_EVENT_RECORDED_STATUS_COMPLETE);
  EXPECT_EQ(aclrtCreateEventWithFlag(&old_mode, 0x80000000u), ACL_ERROR_RT_PARAM_INVALID);  // no such flag
  aclrtDestroyStream(s);
}

// src/runtime/api/impl/api_impl.cc EventCreate: an event belongs to the current context (RT_ERROR_CONTEXT_NULL).
TEST_F(RuntimeApi, EventsNeedAContext) {
  std::thread t([] {
    aclrtEvent e = nullptr;
    EXPECT_EQ(aclrtCreateEvent(&e), ACL_ERROR_RT_CONTEXT_NULL);
    EXPECT_EQ(aclrtCreateEventWithFlag(&e, ACL_EVENT_SYNC), ACL_ERROR_RT_CONTEXT_NULL);
  });
  t.join();
}

// docs/zh/api_ref/05_context_management.md: aclrtCreateContext makes the context the thread's; each context has its own
// default stream; only created contexts can be destroyed; a thread whose context was destroyed has none.
TEST_F(RuntimeApi, ContextsAreCurrentPerThreadWithTheirOwnDefaultStream) {
  aclrtContext primary = nullptr, ctx = nullptr, cur = nullptr;
  ASSERT_EQ(aclrtGetCurrentContext(&primary), ACL_SUCCESS);
  aclrtStream primary_default = nullptr, ctx_default = nullptr;
  ASSERT_EQ(aclrtCtxGetCurrentDefaultStream(&primary_default), ACL_SUCCESS);
  ASSERT_EQ(aclrtCreateContext(&ctx, 1), ACL_SUCCESS);
  ASSERT_EQ(aclrtGetCurrentContext(&cur), ACL_SUCCESS);
  EXPECT_EQ(cur, ctx);
  int32_t dev = -1;
  ASSERT_EQ(aclrtGetDevice(&dev), ACL_SUCCESS);
  EXPECT_EQ(dev, 1);
  ASSERT_EQ(aclrtCtxGetCurrentDefaultStream(&ctx_default), ACL_SUCCESS);
  EXPECT_NE(ctx_default, nullptr);
  EXPECT_NE(ctx_default, primary_default);
  EXPECT_EQ(aclrtDestroyStream(ctx_default), ACL_ERROR_RT_PARAM_INVALID);  // a context's default stream stays
  // The default stream is a stream like any other: NULL means it on this thread.
  void *d = device_floats({1, 2});
  ASSERT_EQ(aclrtMemsetAsync(d, 8, 0x5a, 8, ctx_default), ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeStream(nullptr), ACL_SUCCESS);
  EXPECT_EQ(first_byte(d), 0x5a);
  uint32_t cubes = 0;
  ASSERT_EQ(aclrtGetResInCurrentThread(ACL_RT_DEV_RES_CUBE_CORE, &cubes), ACL_SUCCESS);
  EXPECT_GT(cubes, 0u);
  ASSERT_EQ(aclrtSetCurrentContext(primary), ACL_SUCCESS);
  ASSERT_EQ(aclrtGetDevice(&dev), ACL_SUCCESS);
  EXPECT_EQ(dev, 0);
  EXPECT_EQ(aclrtDestroyContext(primary), ACL_ERROR_RT_PARAM_INVALID);  // a device's default context
  ASSERT_EQ(aclrtSetCurrentContext(ctx), ACL_SUCCESS);
  ASSERT_EQ(aclrtDestroyContext(ctx), ACL_SUCCESS);
  EXPECT_EQ(aclrtGetCurrentContext(&cur), ACL_ERROR_RT_CONTEXT_NULL);
  EXPECT_EQ(aclrtSetCurrentContext(ctx), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtDestroyContext(ctx), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtCreateContext(&cur, 9999), ACL_ERROR_RT_INVALID_DEVICEID);
  ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
  aclrtFree(d);
  aclrtResetDevice(0);
}

// docs/zh/api_ref/04_device_management.md: aclrtSetDevice counts references; aclrtResetDevice drops one and the last
// releases the device's default context; aclrtResetDeviceForce releases it whatever the count.
TEST_F(RuntimeApi, ResetDeviceCountsReferencesAndForceDoesNot) {
  int32_t dev = -1;
  ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS);  // a second reference (SetUp made one)
  ASSERT_EQ(aclrtResetDevice(0), ACL_SUCCESS);
  EXPECT_EQ(aclrtGetDevice(&dev), ACL_SUCCESS);
  ASSERT_EQ(aclrtResetDevice(0), ACL_SUCCESS);
  EXPECT_EQ(aclrtGetDevice(&dev), ACL_ERROR_RT_CONTEXT_NULL);
  ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
  ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
  ASSERT_EQ(aclrtResetDeviceForce(0), ACL_SUCCESS);
  EXPECT_EQ(aclrtGetDevice(&dev), ACL_ERROR_RT_CONTEXT_NULL);
  EXPECT_EQ(aclrtResetDeviceForce(-1), ACL_ERROR_RT_INVALID_DEVICEID);
  ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
}

// src/acl/aclrt_impl/stream.cpp aclrtDestroyStreamForceImpl (rtStreamDestroyForce): the tasks not yet started are
// dropped; aclrtDestroyStream runs them first.
TEST_F(RuntimeApi, DestroyStreamForceDropsQueuedTasks) {
  void *d = device_floats({0, 0});
  for (bool force : {false, true}) {
    ASSERT_EQ(aclrtMemset(d, 8, 0, 8), ACL_SUCCESS);
    aclrtStream s = nullptr;
    ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
    Gate gate;
    ASSERT_EQ(aclrtLaunchHostFunc(s, Gate::hold, &gate), ACL_SUCCESS);
    ASSERT_EQ(aclrtMemsetAsync(d, 8, 7, 8, s), ACL_SUCCESS);
    while (!gate.started) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::thread opener([&gate] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      gate.open = true;
    });
    ASSERT_EQ(force ? aclrtDestroyStreamForce(s) : aclrtDestroyStream(s), ACL_SUCCESS);
    opener.join();
    EXPECT_EQ(first_byte(d), force ? 0 : 7) << (force ? "force" : "plain");
  }
  aclrtFree(d);
}

// src/runtime/api/impl/api_impl.cc StreamSetMode: in stop mode the tasks after a failure do not run; stop cannot go
// back to continue (RT_ERROR_FEATURE_NOT_SUPPORT). Continue (the default) runs them.
TEST_F(RuntimeApi, StopOnFailureSkipsTheTasksAfterAFailure) {
  void *x = device_floats({1, 2, 3, 4}), *o = device_floats({0, 0, 0, 0}), *m = device_floats({0, 0});
  float one = 1.0f;
  aclScalar *alpha = aclCreateScalar(&one, ACL_FLOAT);
  int64_t big[1] = {1000};  // claims 1000 elements of 4: the kernel faults on the device
  aclTensor *tx = aclCreateTensor(big, 1, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, big, 1, x);
  aclTensor *to = aclCreateTensor(big, 1, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, big, 1, o);
  for (uint64_t mode : {(uint64_t)ACL_CONTINUE_ON_FAILURE, (uint64_t)ACL_STOP_ON_FAILURE}) {
    aclrtStream s = nullptr;
    ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
    ASSERT_EQ(aclrtSetStreamFailureMode(s, mode), ACL_SUCCESS);
    ASSERT_EQ(aclrtMemset(m, 8, 0, 8), ACL_SUCCESS);
    uint64_t ws = 0;
    aclOpExecutor *ex = nullptr;
    ASSERT_EQ(aclnnAddGetWorkspaceSize(tx, tx, alpha, to, &ws, &ex), 0);
    ASSERT_EQ(aclnnAdd(nullptr, ws, ex, s), 0);
    ASSERT_EQ(aclrtMemsetAsync(m, 8, 9, 8, s), ACL_SUCCESS);
    EXPECT_EQ(aclrtSynchronizeStream(s), ACL_ERROR_RT_AICORE_EXCEPTION);
    EXPECT_EQ(first_byte(m), mode == ACL_STOP_ON_FAILURE ? 0 : 9);
    if (mode == ACL_STOP_ON_FAILURE) {
      EXPECT_EQ(aclrtSetStreamFailureMode(s, 0), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    }
    aclrtDestroyStream(s);
  }
  EXPECT_EQ(aclrtSetStreamFailureMode(nullptr, 2), ACL_ERROR_INVALID_PARAM);
  aclDestroyTensor(tx);
  aclDestroyTensor(to);
  aclDestroyScalar(alpha);
  aclrtFree(x);
  aclrtFree(o);
  aclrtFree(m);
}

// aclrtLaunchHostFunc (docs/zh/api_ref/12_execution_control.md): the function runs when the stream reaches it, after
// the tasks before it, and the stream waits for it.
TEST_F(RuntimeApi, HostFunctionRunsInStreamOrder) {
  aclrtStream s = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
  void *d = device_floats({0, 0});
  struct Seen {
    float copied[2] = {0, 0};
    float at_call = -1;
  } seen;
  ASSERT_EQ(aclrtMemsetAsync(d, 8, 0, 8, s), ACL_SUCCESS);
  const float two[2] = {3.5f, 4.5f};
  ASSERT_EQ(aclrtMemcpyAsync(d, 8, two, 8, ACL_MEMCPY_HOST_TO_DEVICE, s), ACL_SUCCESS);
  ASSERT_EQ(aclrtMemcpyAsync(seen.copied, 8, d, 8, ACL_MEMCPY_DEVICE_TO_HOST, s), ACL_SUCCESS);
  ASSERT_EQ(aclrtLaunchHostFunc(
                s, [](void *p) { static_cast<Seen *>(p)->at_call = static_cast<Seen *>(p)->copied[1]; }, &seen),
            ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeStream(s), ACL_SUCCESS);
  EXPECT_EQ(seen.at_call, 4.5f);
  EXPECT_EQ(aclrtLaunchHostFunc(s, nullptr, nullptr), ACL_ERROR_INVALID_PARAM);
  aclrtDestroyStream(s);
  aclrtFree(d);
}

// stream.cpp aclrtStreamGet{Id,Priority,Flags}: what the stream was made with (aclrtCreateStreamWithConfig, or a
// config handle through aclrtCreateStreamV2).
TEST_F(RuntimeApi, StreamsReportTheirConfiguration) {
  aclrtStream a = nullptr, b = nullptr;
  ASSERT_EQ(aclrtCreateStreamWithConfig(&a, 3, ACL_STREAM_FAST_LAUNCH), ACL_SUCCESS);
  aclrtStreamConfigHandle *h = aclrtCreateStreamConfigHandle();
  ASSERT_NE(h, nullptr);
  const uint32_t flags = ACL_STREAM_FAST_SYNC, prio = 5;
  ASSERT_EQ(aclrtSetStreamConfigOpt(h, ACL_RT_STREAM_FLAG, &flags, sizeof flags), ACL_SUCCESS);
  ASSERT_EQ(aclrtSetStreamConfigOpt(h, ACL_RT_STREAM_PRIORITY, &prio, sizeof prio), ACL_SUCCESS);
  EXPECT_EQ(aclrtSetStreamConfigOpt(h, ACL_RT_STREAM_PRIORITY, &prio, 2), ACL_ERROR_INVALID_PARAM);
  ASSERT_EQ(aclrtCreateStreamV2(&b, h), ACL_SUCCESS);
  ASSERT_EQ(aclrtDestroyStreamConfigHandle(h), ACL_SUCCESS);
  uint32_t p = 0, f = 0;
  int32_t ida = -1, idb = -1;
  ASSERT_EQ(aclrtStreamGetPriority(a, &p), ACL_SUCCESS);
  ASSERT_EQ(aclrtStreamGetFlags(a, &f), ACL_SUCCESS);
  EXPECT_EQ(p, 3u);
  EXPECT_EQ(f, ACL_STREAM_FAST_LAUNCH);
  ASSERT_EQ(aclrtStreamGetPriority(b, &p), ACL_SUCCESS);
  ASSERT_EQ(aclrtStreamGetFlags(b, &f), ACL_SUCCESS);
  EXPECT_EQ(p, 5u);
  EXPECT_EQ(f, ACL_STREAM_FAST_SYNC);
  ASSERT_EQ(aclrtStreamGetId(a, &ida), ACL_SUCCESS);
  ASSERT_EQ(aclrtStreamGetId(b, &idb), ACL_SUCCESS);
  EXPECT_NE(ida, idb);
  aclrtDestroyStream(a);
  aclrtDestroyStream(b);
}

// memory.cpp aclrtMemsetImpl and api_ref 11-03_memory_copy_and_set.md: aclrtMemset / aclrtMemsetAsync set host memory
// the runtime allocated (aclrtMallocHost) as well as device memory, by address; a count of 0 succeeds before the null
// check; memory neither allocated is refused by the runtime (107000).
TEST_F(RuntimeApi, MemsetReachesRuntimeHostMemory) {
  void *host = nullptr;
  ASSERT_EQ(aclrtMallocHost(&host, 16), ACL_SUCCESS);
  ASSERT_EQ(aclrtMemset(host, 16, 0x5a, 16), ACL_SUCCESS);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(static_cast<uint8_t *>(host)[i], 0x5a);
  aclrtStream s = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
  ASSERT_EQ(aclrtMemsetAsync(host, 16, 0x11, 8, s), ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeStream(s), ACL_SUCCESS);
  EXPECT_EQ(static_cast<uint8_t *>(host)[7], 0x11);
  EXPECT_EQ(static_cast<uint8_t *>(host)[8], 0x5a);
  EXPECT_EQ(aclrtMemset(nullptr, 0, 1, 0), ACL_SUCCESS);
  EXPECT_EQ(aclrtMemset(nullptr, 16, 1, 16), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMemset(host, 32, 1, 32), ACL_ERROR_RT_PARAM_INVALID);  // past the allocation
  uint8_t stack[16];
  EXPECT_EQ(aclrtMemset(stack, 16, 1, 16), ACL_ERROR_RT_PARAM_INVALID);
  aclrtDestroyStream(s);
  EXPECT_EQ(aclrtFreeHost(host), ACL_SUCCESS);
}

// allocator.cpp: registering copies the description's functions (a later change does not reach the registration) and
// remembers the description; a description without alloc, free or get-address, or a stream without one, is refused
// (100000); unregistering twice succeeds. The 0_custom_allocator sample's calls.
namespace alloc_fns {
int allocs = 0;
void *alloc(aclrtAllocator, size_t size) { return ++allocs, new char[size]; }
void release(aclrtAllocator, aclrtAllocatorBlock b) { delete[] static_cast<char *>(b); }
void *addr(aclrtAllocatorBlock b) { return b; }
void *other_addr(aclrtAllocatorBlock) { return nullptr; }
}  // namespace alloc_fns

TEST_F(RuntimeApi, AllocatorRegisteredForAStream) {
  aclrtStream s = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
  int state = 0;
  aclrtAllocatorDesc desc = aclrtAllocatorCreateDesc();
  ASSERT_NE(desc, nullptr);
  ASSERT_EQ(aclrtAllocatorSetObjToDesc(desc, &state), ACL_SUCCESS);
  ASSERT_EQ(aclrtAllocatorSetAllocFuncToDesc(desc, alloc_fns::alloc), ACL_SUCCESS);
  ASSERT_EQ(aclrtAllocatorSetFreeFuncToDesc(desc, alloc_fns::release), ACL_SUCCESS);
  EXPECT_EQ(aclrtAllocatorRegister(s, desc), ACL_ERROR_INVALID_PARAM);  // no get-address function yet
  ASSERT_EQ(aclrtAllocatorSetGetAddrFromBlockFuncToDesc(desc, alloc_fns::addr), ACL_SUCCESS);
  EXPECT_EQ(aclrtAllocatorSetAllocFuncToDesc(desc, nullptr), ACL_ERROR_INVALID_PARAM);
  ASSERT_EQ(aclrtAllocatorRegister(s, desc), ACL_SUCCESS);
  ASSERT_EQ(aclrtAllocatorSetGetAddrFromBlockFuncToDesc(desc, alloc_fns::other_addr), ACL_SUCCESS);  // after: unseen

  aclrtAllocatorDesc got_desc = nullptr;
  aclrtAllocator obj = nullptr;
  aclrtAllocatorAllocFunc alloc = nullptr;
  aclrtAllocatorFreeFunc release = nullptr;
  aclrtAllocatorAllocAdviseFunc advise = reinterpret_cast<aclrtAllocatorAllocAdviseFunc>(1);
  aclrtAllocatorGetAddrFromBlockFunc addr = nullptr;
  ASSERT_EQ(aclrtAllocatorGetByStream(s, &got_desc, &obj, &alloc, &release, &advise, &addr), ACL_SUCCESS);
  EXPECT_EQ(got_desc, desc);
  EXPECT_EQ(obj, &state);
  EXPECT_EQ(addr, alloc_fns::addr);
  EXPECT_EQ(advise, nullptr);  // never set
  aclrtAllocatorBlock b = alloc(obj, 16);
  EXPECT_EQ(alloc_fns::allocs, 1);
  EXPECT_EQ(addr(b), b);
  release(obj, b);

  EXPECT_EQ(aclrtAllocatorUnregister(s), ACL_SUCCESS);
  EXPECT_EQ(aclrtAllocatorUnregister(s), ACL_SUCCESS);
  EXPECT_EQ(aclrtAllocatorGetByStream(s, &got_desc, nullptr, nullptr, nullptr, nullptr, nullptr),
            ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtAllocatorRegister(nullptr, desc), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtAllocatorDestroyDesc(desc), ACL_SUCCESS);
  aclrtDestroyStream(s);
}

// device.cpp / stream.cpp over api_impl.cc and api_error.cc: SATURATION until set (Runtime::satMode_), only SATURATION
// and INFNAN can be set (107000); a stream's switch is 0 or 1 (the ACL's 100000); the status is 64 bytes
// (OVERFLOW_OUTPUT_SIZE, other sizes 107000) copied by a task, zero as no kernel overflowed; not on a capturing
// stream (107027). The 0_overflow_detection sample's calls.
TEST_F(RuntimeApi, OverflowModeSwitchAndStatus) {
  aclrtFloatOverflowMode mode = ACL_RT_OVERFLOW_MODE_UNDEF;
  ASSERT_EQ(aclrtGetDeviceSatMode(&mode), ACL_SUCCESS);
  EXPECT_EQ(mode, ACL_RT_OVERFLOW_MODE_SATURATION);
  ASSERT_EQ(aclrtSetDeviceSatMode(ACL_RT_OVERFLOW_MODE_INFNAN), ACL_SUCCESS);
  ASSERT_EQ(aclrtGetDeviceSatMode(&mode), ACL_SUCCESS);
  EXPECT_EQ(mode, ACL_RT_OVERFLOW_MODE_INFNAN);
  EXPECT_EQ(aclrtSetDeviceSatMode(ACL_RT_OVERFLOW_MODE_UNDEF), ACL_ERROR_RT_PARAM_INVALID);
  ASSERT_EQ(aclrtSetDeviceSatMode(ACL_RT_OVERFLOW_MODE_SATURATION), ACL_SUCCESS);

  aclrtStream s = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
  uint32_t on = 7;
  ASSERT_EQ(aclrtGetStreamOverflowSwitch(s, &on), ACL_SUCCESS);
  EXPECT_EQ(on, 0u);
  ASSERT_EQ(aclrtSetStreamOverflowSwitch(s, 1), ACL_SUCCESS);
  ASSERT_EQ(aclrtGetStreamOverflowSwitch(s, &on), ACL_SUCCESS);
  EXPECT_EQ(on, 1u);
  EXPECT_EQ(aclrtSetStreamOverflowSwitch(s, 2), ACL_ERROR_INVALID_PARAM);

  std::vector<float> junk(16, 3.0f);
  void *status = device_floats(junk);
  ASSERT_EQ(aclrtGetOverflowStatus(status, 64, s), ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeStream(s), ACL_SUCCESS);
  std::vector<uint8_t> host(64, 0xee);
  ASSERT_EQ(aclrtMemcpy(host.data(), 64, status, 64, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);
  EXPECT_EQ(host, std::vector<uint8_t>(64, 0));
  EXPECT_EQ(aclrtGetOverflowStatus(status, 32, s), ACL_ERROR_RT_PARAM_INVALID);
  ASSERT_EQ(aclrtResetOverflowStatus(s), ACL_SUCCESS);
  ASSERT_EQ(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_RELAXED), ACL_SUCCESS);
  EXPECT_EQ(aclrtGetOverflowStatus(status, 64, s), ACL_ERROR_RT_STREAM_CAPTURED);
  aclmdlRI ri = nullptr;
  ASSERT_EQ(aclmdlRICaptureEnd(s, &ri), ACL_SUCCESS);
  ASSERT_EQ(aclmdlRIDestroy(ri), ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeStream(s), ACL_SUCCESS);
  aclrtFree(status);
  aclrtDestroyStream(s);
}

// adump_api_platform.cpp aclopStartDumpArgs / aclopStopDumpArgs, dump_manager.cpp StartDumpArgs (and adump's own unit
// test Test_OP_Dump_StartStop_Error): a missing directory is made; a second start, an empty or NULL path, a type
// without ACL_OP_DUMP_OP_AICORE_ARGS, a file where the directory should be are ACL_ERROR_FAILURE; a stop without a
// start succeeds; the data dump path (acldumpGetPath) is not the args dump's.
TEST_F(RuntimeApi, OpArgsDumpSwitch) {
  char tmpl[] = "/tmp/fake_cann_args_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = std::string(tmpl) + "/made/here";
  EXPECT_EQ(aclopStopDumpArgs(ACL_OP_DUMP_OP_AICORE_ARGS), ACL_SUCCESS);
  EXPECT_EQ(aclopStartDumpArgs(0, dir.c_str()), ACL_ERROR_FAILURE);
  EXPECT_EQ(aclopStartDumpArgs(ACL_OP_DUMP_OP_AICORE_ARGS, nullptr), ACL_ERROR_FAILURE);
  EXPECT_EQ(aclopStartDumpArgs(ACL_OP_DUMP_OP_AICORE_ARGS, ""), ACL_ERROR_FAILURE);
  const std::string file = std::string(tmpl) + "/file";
  std::fclose(std::fopen(file.c_str(), "w"));
  EXPECT_EQ(aclopStartDumpArgs(ACL_OP_DUMP_OP_AICORE_ARGS, file.c_str()), ACL_ERROR_FAILURE);
  ASSERT_EQ(aclopStartDumpArgs(ACL_OP_DUMP_OP_AICORE_ARGS, dir.c_str()), ACL_SUCCESS);
  struct stat st;
  EXPECT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(aclopStartDumpArgs(ACL_OP_DUMP_OP_AICORE_ARGS, dir.c_str()), ACL_ERROR_FAILURE);
  EXPECT_EQ(acldumpGetPath(DATA_DUMP), nullptr);
  EXPECT_EQ(aclopStopDumpArgs(ACL_OP_DUMP_OP_AICORE_ARGS), ACL_SUCCESS);
  EXPECT_EQ(aclopStartDumpArgs(ACL_OP_DUMP_OP_AICORE_ARGS, dir.c_str()), ACL_SUCCESS);  // again after a stop
  EXPECT_EQ(aclopStopDumpArgs(ACL_OP_DUMP_OP_AICORE_ARGS), ACL_SUCCESS);
  std::system(("rm -rf " + std::string(tmpl)).c_str());
}

// ipc_event.cc (IpcEventRecord / IpcEventWait / IpcEventQuery) and api_impl_event.cc: an event made by
// aclrtCreateEventExWithFlag(ACL_EVENT_IPC) is shared with whoever opens its handle: a record pending in one is
// pending in the other, a wait through the other holds its stream until the record runs; before any record it reads
// COMPLETE. Only an IPC event has a handle (107000); opening needs a context (107002) and a live handle (107000).
TEST_F(RuntimeApi, IpcEventSharedThroughItsHandle) {
  aclrtStream s = nullptr, other = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
  ASSERT_EQ(aclrtCreateStream(&other), ACL_SUCCESS);
  aclrtEvent ipc = nullptr, plain = nullptr, opened = nullptr;
  ASSERT_EQ(aclrtCreateEventExWithFlag(&ipc, ACL_EVENT_IPC), ACL_SUCCESS);
  ASSERT_EQ(aclrtCreateEvent(&plain), ACL_SUCCESS);
  aclrtIpcEventHandle handle;
  EXPECT_EQ(aclrtIpcGetEventHandle(plain, &handle), ACL_ERROR_RT_PARAM_INVALID);
  ASSERT_EQ(aclrtIpcGetEventHandle(ipc, &handle), ACL_SUCCESS);
  aclrtEventRecordedStatus st = ACL_EVENT_RECORDED_STATUS_NOT_READY;
  ASSERT_EQ(aclrtQueryEventStatus(ipc, &st), ACL_SUCCESS);
  EXPECT_EQ(st, ACL_EVENT_RECORDED_STATUS_COMPLETE);  // nothing recorded: nothing pending

  Gate gate;
  ASSERT_EQ(aclrtLaunchHostFunc(s, Gate::hold, &gate), ACL_SUCCESS);
  ASSERT_EQ(aclrtRecordEvent(ipc, s), ACL_SUCCESS);
  ASSERT_EQ(aclrtIpcOpenEventHandle(handle, &opened), ACL_SUCCESS);
  ASSERT_EQ(aclrtQueryEventStatus(opened, &st), ACL_SUCCESS);
  EXPECT_EQ(st, ACL_EVENT_RECORDED_STATUS_NOT_READY);
  ASSERT_EQ(aclrtStreamWaitEvent(other, opened), ACL_SUCCESS);
  EXPECT_EQ(aclrtSynchronizeStreamWithTimeout(other, 50), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
  gate.open = true;
  ASSERT_EQ(aclrtSynchronizeStream(other), ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeEvent(ipc), ACL_SUCCESS);
  ASSERT_EQ(aclrtQueryEventStatus(opened, &st), ACL_SUCCESS);
  EXPECT_EQ(st, ACL_EVENT_RECORDED_STATUS_COMPLETE);

  aclrtIpcEventHandle bogus;
  std::memset(&bogus, 0x7b, sizeof(bogus));
  aclrtEvent none = nullptr;
  EXPECT_EQ(aclrtIpcOpenEventHandle(bogus, &none), ACL_ERROR_RT_PARAM_INVALID);
  aclError no_context = ACL_SUCCESS;
  std::thread([&] { no_context = aclrtIpcOpenEventHandle(handle, &none); }).join();
  EXPECT_EQ(no_context, ACL_ERROR_RT_CONTEXT_NULL);
  EXPECT_EQ(aclrtDestroyEvent(opened), ACL_SUCCESS);
  EXPECT_EQ(aclrtDestroyEvent(ipc), ACL_SUCCESS);
  EXPECT_EQ(aclrtIpcOpenEventHandle(handle, &none), ACL_ERROR_RT_PARAM_INVALID);  // the creator destroyed it
  aclrtDestroyEvent(plain);
  aclrtDestroyStream(s);
  aclrtDestroyStream(other);
}

// The same across processes (the ipcevent samples): a child process waits through the handle for the parent's
// pending record, and its stream is held until the parent's record runs.
TEST_F(RuntimeApi, IpcEventWaitAcrossProcesses) {
  aclrtStream s = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
  aclrtEvent ipc = nullptr;
  ASSERT_EQ(aclrtCreateEventExWithFlag(&ipc, ACL_EVENT_IPC), ACL_SUCCESS);
  aclrtIpcEventHandle handle;
  ASSERT_EQ(aclrtIpcGetEventHandle(ipc, &handle), ACL_SUCCESS);
  Gate gate;
  ASSERT_EQ(aclrtLaunchHostFunc(s, Gate::hold, &gate), ACL_SUCCESS);
  ASSERT_EQ(aclrtRecordEvent(ipc, s), ACL_SUCCESS);
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  if (child == 0) {  // its own stream (the parent's workers are not in this process)
    aclrtStream cs = nullptr;
    aclrtEvent opened = nullptr;
    int code = aclrtCreateStream(&cs) != ACL_SUCCESS                ? 2
               : aclrtIpcOpenEventHandle(handle, &opened) != ACL_SUCCESS ? 3
               : aclrtStreamWaitEvent(cs, opened) != ACL_SUCCESS         ? 4
                                                                         : 0;
    const char byte = 'w';
    (void)!write(ready[1], &byte, 1);
    if (code == 0 && aclrtSynchronizeStreamWithTimeout(cs, 50) != ACL_ERROR_RT_STREAM_SYNC_TIMEOUT) code = 5;
    if (code == 0 && aclrtSynchronizeStreamWithTimeout(cs, 10000) != ACL_SUCCESS) code = 6;
    _exit(code);
  }
  char byte = 0;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the child's wait is pending meanwhile
  gate.open = true;
  ASSERT_EQ(aclrtSynchronizeStream(s), ACL_SUCCESS);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(aclrtDestroyEvent(ipc), ACL_SUCCESS);
  aclrtDestroyStream(s);
}

}  // namespace
