// Status / Expected: codes, exit codes, messages, assert macros.
#include <gtest/gtest.h>

#include "core/status.h"

namespace onboard {
namespace {

Expected<int> Half(int x) {
  if (x % 2) return BadInput("n.json", "x", "must be even", std::to_string(x));
  return x / 2;
}

Status UseHalf(int x, int* out) {
  ONBOARD_ASSIGN_OR_RETURN(*out, Half(x));
  return Status::Ok();
}

TEST(Status, BadInputNamesFileFieldAndValueOnOneLine) {
  Status st = BadInput("cfg.json", "hidden_size", "must be positive", "-3\nx");
  EXPECT_EQ(st.code(), ErrorCode::kBadInput);
  EXPECT_EQ(ExitCodeFor(st.code()), 2);
  EXPECT_EQ(st.message(), "cfg.json: field 'hidden_size': must be positive (got -3?x)");
}

TEST(Status, ExpectedCarriesValueOrError) {
  int out = 0;
  EXPECT_TRUE(UseHalf(8, &out).ok());
  EXPECT_EQ(out, 4);
  Status st = UseHalf(7, &out);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("must be even"), std::string::npos);
}

TEST(Status, AssertThrowsWithFileAndLine) {
  try {
    ONBOARD_ASSERT(1 + 1 == 3, "arithmetic");
    FAIL() << "no throw";
  } catch (const InvariantError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("status_test.cpp:"), std::string::npos);
    EXPECT_NE(what.find("arithmetic"), std::string::npos);
  }
  Expected<int> bad = Half(3);
  EXPECT_THROW((void)bad.value(), InvariantError);
}

}  // namespace
}  // namespace onboard
