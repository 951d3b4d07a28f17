// Issue 10 item 1: one resolver of a topology argument (agent/topology_source.h) for `onboard plan`,
// `onboard run` and the service: a shipped name means its file under examples/topologies, with or
// without ".json"; a network client's name never reaches a file elsewhere.
#include <gtest/gtest.h>

#include "agent/topology_source.h"

namespace onboard::agent {
namespace {

const std::string kFile =
    std::string(ONBOARD_SOURCE_DIR) + "/examples/topologies/atlas-950-superpod-128.json";

TEST(TopologySource, ANameIsItsShippedFile) {
  Expected<Topology> by_name = ResolveTopology("atlas-950-superpod-128");
  Expected<Topology> by_json = ResolveTopology("atlas-950-superpod-128.json");
  Expected<Topology> by_path = ResolveTopology(kFile);
  ASSERT_TRUE(by_name.ok()) << by_name.status().message();
  ASSERT_TRUE(by_json.ok()) << by_json.status().message();
  ASSERT_TRUE(by_path.ok()) << by_path.status().message();
  EXPECT_EQ(by_name->name, by_path->name);
  EXPECT_EQ(by_name->num_devices, by_path->num_devices);
  EXPECT_EQ(by_json->num_devices, by_path->num_devices);
  EXPECT_EQ(by_name->tiers.size(), by_path->tiers.size());
  Expected<std::string> shipped = ShippedTopologyPath("atlas-950-superpod-128");
  ASSERT_TRUE(shipped.ok()) << shipped.status().message();
  EXPECT_NE(shipped->find("examples/topologies/atlas-950-superpod-128.json"), std::string::npos) << *shipped;
}

TEST(TopologySource, UnknownNamesAndPathsOutsideTheShippedOnesAreRefused) {
  Expected<Topology> none = ResolveTopology("no-such-topology");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(ExitCodeFor(none.status().code()), 2);
  EXPECT_NE(none.status().message().find("no-such-topology"), std::string::npos) << none.status().message();
  for (const char* name : {"../../CMakeLists.txt", "/etc/hostname", kFile.c_str(), "no-such-topology"})
    EXPECT_FALSE(ShippedTopologyPath(name).ok()) << name;
}

}  // namespace
}  // namespace onboard::agent
