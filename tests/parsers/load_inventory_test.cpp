// LoadInventoryBeside: the inventory stored beside a model directory (index, else one shard), through
// the one shard listing SafetensorsFilesIn shares with SafetensorsCheckpoint.
#include <gtest/gtest.h>

#include "parsers/load_model.h"
#include "parsers/safetensors_weights.h"
#include "tests/parsers/safetensors_test_util.h"

namespace onboard {
namespace {

using testing_st::MakeTempDir;
using testing_st::WriteBytes;
using testing_st::Zeros;

TEST(LoadInventoryBeside, OneShardIsReadSeveralWithoutAnIndexAreANote) {
  const std::string dir = MakeTempDir();
  WriteBytes(dir + "/notes.txt", "not a shard");
  EXPECT_TRUE(SafetensorsFilesIn(dir).empty());
  std::string note;
  Expected<std::optional<TensorInventory>> none = LoadInventoryBeside(dir, &note);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  EXPECT_TRUE(note.empty());

  ASSERT_TRUE(WriteSafetensorsFile(dir + "/b.safetensors", {Zeros("w", {2, 2})}).ok());
  Expected<std::optional<TensorInventory>> one = LoadInventoryBeside(dir, &note);
  ASSERT_TRUE(one.ok() && one->has_value());
  EXPECT_EQ((*one)->tensors.size(), 1u);
  EXPECT_TRUE(note.empty());

  ASSERT_TRUE(WriteSafetensorsFile(dir + "/a.safetensors", {Zeros("v", {2})}).ok());
  EXPECT_EQ(SafetensorsFilesIn(dir), (std::vector<std::string>{"a.safetensors", "b.safetensors"}));
  Expected<std::optional<TensorInventory>> two = LoadInventoryBeside(dir, &note);
  ASSERT_TRUE(two.ok());
  EXPECT_FALSE(two->has_value());
  EXPECT_EQ(note, "2 .safetensors shards without model.safetensors.index.json: not cross-checked");
  EXPECT_FALSE(LoadInventoryBeside(dir + "/a.safetensors", &note)->has_value());  // a file, not a directory
}

}  // namespace
}  // namespace onboard
