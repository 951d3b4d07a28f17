// ProbeTask (core/probe_task.h): one spelling, one parser, one printer for the probe's task, shared by
// the CLI's --task and the probe JSON; an unknown name is one line naming origin, field and value
// (exit 2), with the message the CLI always printed.
#include <gtest/gtest.h>

#include <string>

#include "core/probe_task.h"

namespace onboard {
namespace {

TEST(ProbeTask, NamesRoundTrip) {
  for (ProbeTask t : {ProbeTask::kCopy, ProbeTask::kText, ProbeTask::kLookup, ProbeTask::kImage}) {
    Expected<ProbeTask> p = ParseProbeTask("t", "task", ProbeTaskName(t));
    ASSERT_TRUE(p.ok()) << p.status().message();
    EXPECT_EQ(*p, t);
  }
  EXPECT_STREQ(ProbeTaskName(ProbeTask::kCopy), "copy");
  EXPECT_STREQ(ProbeTaskName(ProbeTask::kText), "text");
  EXPECT_STREQ(ProbeTaskName(ProbeTask::kLookup), "lookup");
  EXPECT_STREQ(ProbeTaskName(ProbeTask::kImage), "image");
}

TEST(ProbeTask, UnknownNameIsOneLineNamingOriginFieldAndValue) {
  for (const char* bad : {"sort", "Copy", "text ", ""}) {
    Expected<ProbeTask> p = ParseProbeTask("--task", "task", bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(ExitCodeFor(p.status().code()), 2);
    const std::string got = *bad ? " (got " + std::string(bad) + ")" : "";
    EXPECT_EQ(p.status().message(), "--task: field 'task': must be copy, text, lookup or image" + got);
  }
}

}  // namespace
}  // namespace onboard
