// races/clocks.h: the happens-before CANN's streams, events and synchronizations make, as vector clocks.
#include "races/clocks.h"

#include <gtest/gtest.h>

namespace msprobe::races {
namespace {

using record::LaunchStamp;

// Stand-ins for stream and event handles: only their addresses matter.
int s_handle, t_handle, u_handle, e_handle, f_handle;
const void *const S = &s_handle, *const T = &t_handle, *const U = &u_handle;
const void *const E = &e_handle, *const F = &f_handle;

bool ordered(const LaunchStamp &a, const LaunchStamp &b) { return ordered_before(a, b) || ordered_before(b, a); }

TEST(Clocks, StreamOrder) {
  StreamClocks c;
  LaunchStamp k1 = c.launch(S), k2 = c.launch(S);
  EXPECT_EQ(k1.actor, k2.actor);
  EXPECT_EQ(k1.epoch + 1, k2.epoch);
  EXPECT_TRUE(ordered_before(k1, k2));
  EXPECT_FALSE(ordered_before(k2, k1));
}

TEST(Clocks, TwoStreamsWithoutEventsAreUnordered) {
  StreamClocks c;
  LaunchStamp k = c.launch(S), l = c.launch(T);
  EXPECT_NE(k.actor, l.actor);
  EXPECT_FALSE(ordered(k, l));
}

TEST(Clocks, AWaitOrdersWhatWasRecordedBeforeIt) {
  StreamClocks c;
  LaunchStamp k = c.launch(S);
  c.record(E, S);
  LaunchStamp after_record = c.launch(S);
  c.wait(T, E);
  LaunchStamp l = c.launch(T);
  EXPECT_TRUE(ordered_before(k, l));
  EXPECT_FALSE(ordered(after_record, l));  // launched on S after the record: the wait says nothing of it
}

TEST(Clocks, AWaitBeforeTheRecordOrdersNothing) {
  StreamClocks c;
  LaunchStamp k = c.launch(S);
  c.wait(T, E);  // E was never recorded: the wait returns at once (CANN, the stand-in)
  c.record(E, S);
  LaunchStamp l = c.launch(T);
  EXPECT_FALSE(ordered(k, l));
}

TEST(Clocks, AWaitTakesTheLatestRecord) {
  StreamClocks c;
  c.record(E, S);
  LaunchStamp k = c.launch(S);
  c.record(E, S);  // again, after k
  c.wait(T, E);
  EXPECT_TRUE(ordered_before(k, c.launch(T)));
}

TEST(Clocks, EdgesChainAcrossStreams) {
  StreamClocks c;
  LaunchStamp k = c.launch(S);
  c.record(E, S);
  c.wait(T, E);
  c.launch(T);
  c.record(F, T);
  c.wait(U, F);
  LaunchStamp m = c.launch(U);
  EXPECT_TRUE(ordered_before(k, m));
}

TEST(Clocks, TheHostLearnsFromASynchronizationAndPassesItOn) {
  StreamClocks c;
  LaunchStamp k = c.launch(S);
  const VectorClock before = c.of_stream(S);  // taken before the call
  LaunchStamp late = c.launch(S);             // enqueued by another thread meanwhile: not covered
  c.host_learns(before);                      // the call returned
  LaunchStamp copy = c.host_access();
  EXPECT_EQ(copy.actor, StreamClocks::kHost);
  EXPECT_TRUE(ordered_before(k, copy));
  EXPECT_FALSE(ordered(late, copy));
  LaunchStamp l = c.launch(T);  // launched after the host's copy: after it, and after k
  EXPECT_TRUE(ordered_before(copy, l));
  EXPECT_TRUE(ordered_before(k, l));
  EXPECT_FALSE(ordered(late, l));
}

TEST(Clocks, AHostAccessIsOrderedBeforeLaterLaunchesOnly) {
  StreamClocks c;
  LaunchStamp k = c.launch(S);
  LaunchStamp h = c.host_access();
  LaunchStamp l = c.launch(S);
  EXPECT_FALSE(ordered(k, h));  // no synchronization: the kernel may still run while the host copies
  EXPECT_TRUE(ordered_before(h, l));
}

TEST(Clocks, EventAndDeviceSynchronizations) {
  StreamClocks c;
  LaunchStamp k = c.launch(S);
  c.record(E, S);
  LaunchStamp k2 = c.launch(S);
  c.host_learns(c.of_event(E));
  LaunchStamp h = c.host_access();
  EXPECT_TRUE(ordered_before(k, h));
  EXPECT_FALSE(ordered(k2, h));
  LaunchStamp t = c.launch(T);
  c.host_learns(c.of_device());
  LaunchStamp h2 = c.host_access();
  EXPECT_TRUE(ordered_before(k2, h2));
  EXPECT_TRUE(ordered_before(t, h2));
  EXPECT_TRUE(c.of_event(F).empty());  // never recorded: nothing to learn
}

TEST(Clocks, UnstampedIsNeverOrdered) {
  StreamClocks c;
  LaunchStamp k = c.launch(S);
  LaunchStamp none;
  EXPECT_FALSE(ordered(k, none));
}

TEST(Clocks, ActorsInOrderOfFirstUse) {
  StreamClocks c;
  EXPECT_EQ(c.actor_of(T), 1u);
  EXPECT_EQ(c.launch(S).actor, 2u);
  EXPECT_EQ(c.actor_of(T), 1u);
  EXPECT_EQ(c.launch(nullptr).actor, 3u);  // the default stream is a stream too
}

}  // namespace
}  // namespace msprobe::races
