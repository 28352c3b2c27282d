// The prepared launch of the sm_90a launchers (kernels/hopper/prepared_launch.hpp) with no GPU:
// prepare() does the host work once per key, run() on that key only enqueues, and any changed
// buffer, shape, tile or device prepares again. tests/test_prepared_launch_gpu.cpp checks fa3 and
// fp8 themselves.
#include <gtest/gtest.h>

#include <string>

#include "kernels/hopper/prepared_launch.hpp"

namespace fa::hopper {
namespace {

LaunchKey key_for(void* o) {
  Shape s;
  s.N = 2048;
  s.d = 128;
  LaunchKey key;
  key.shape = s;
  key.tiles = Tiles{128, 128};
  key.buffers.o = o;
  key.device = 0;
  return key;
}

// A make() that counts its calls and an enqueue that counts its launches.
struct Counting {
  int made = 0;
  int launched = 0;
  std::string fail;  // make() returns this ("" succeeds)
  auto make() {
    return [this](Enqueue* out) {
      ++made;
      if (!fail.empty()) return fail;
      *out = [this](cudaStream_t) {
        ++launched;
        return std::string();
      };
      return std::string();
    };
  }
};

int o_buffer[2];

TEST(PreparedLaunch, RunAfterPrepareOnlyEnqueues) {
  PreparedLaunch prepared;
  Counting c;
  const auto before = launches_prepared().load();
  ASSERT_EQ(prepared.prepare(key_for(&o_buffer[0]), c.make()), "");
  EXPECT_EQ(c.made, 1);
  EXPECT_EQ(prepared.prepare(key_for(&o_buffer[0]), c.make()), "");  // already prepared
  for (int i = 0; i < 3; ++i) EXPECT_EQ(prepared.run(key_for(&o_buffer[0]), c.make(), nullptr), "");
  EXPECT_EQ(c.made, 1);
  EXPECT_EQ(c.launched, 3);
  EXPECT_EQ(launches_prepared().load() - before, 1);
}

TEST(PreparedLaunch, AnyChangedPartPreparesAgain) {
  PreparedLaunch prepared;
  Counting c;
  const LaunchKey base = key_for(&o_buffer[0]);
  ASSERT_EQ(prepared.prepare(base, c.make()), "");
  LaunchKey buffer = base, shape = base, causal = base, tiles = base, device = base, ws = base;
  buffer.buffers.o = &o_buffer[1];
  shape.shape.N = 4096;
  causal.shape.causal = true;
  tiles.tiles = Tiles{192, 128};
  device.device = 1;
  ws.buffers.workspace_bytes = 8;
  int expected = 1;
  for (const LaunchKey& k : {buffer, shape, causal, tiles, device, ws}) {
    EXPECT_TRUE(k != base);
    EXPECT_EQ(prepared.run(k, c.make(), nullptr), "");
    EXPECT_EQ(c.made, ++expected);
  }
  EXPECT_EQ(prepared.run(base, c.make(), nullptr), "");  // one key is kept: base is new again
  EXPECT_EQ(c.made, expected + 1);
  EXPECT_EQ(c.launched, 7);
}

TEST(PreparedLaunch, AFailedPrepareLaunchesNothingAndIsTriedAgain) {
  PreparedLaunch prepared;
  Counting c;
  c.fail = "fa3: schedule not compiled";
  EXPECT_EQ(prepared.prepare(key_for(&o_buffer[0]), c.make()), "fa3: schedule not compiled");
  EXPECT_EQ(prepared.run(key_for(&o_buffer[0]), c.make(), nullptr), "fa3: schedule not compiled");
  EXPECT_EQ(c.made, 2);
  EXPECT_EQ(c.launched, 0);
  c.fail.clear();
  EXPECT_EQ(prepared.run(key_for(&o_buffer[0]), c.make(), nullptr), "");
  EXPECT_EQ(c.launched, 1);
}

TEST(PreparedLaunch, AMakeThatSetsNoLaunchIsAnError) {
  PreparedLaunch prepared;
  EXPECT_EQ(prepared.prepare(key_for(&o_buffer[0]), [](Enqueue*) { return std::string(); }),
            "no launch prepared");
}

}  // namespace
}  // namespace fa::hopper
