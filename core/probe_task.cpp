// The one spelling and parser of ProbeTask (see probe_task.h).
#include "core/probe_task.h"

#include "core/enum_names.h"

namespace onboard {

const char* ProbeTaskName(ProbeTask t) {
  switch (t) {
    case ProbeTask::kCopy:
      return "copy";
    case ProbeTask::kText:
      return "text";
    case ProbeTask::kLookup:
      return "lookup";
    case ProbeTask::kImage:
      return "image";
  }
  return "copy";  // unreachable: every enumerator is named above
}

Expected<ProbeTask> ParseProbeTask(const std::string& origin, const std::string& field,
                                   const std::string& value) {
  return ParseByName(origin, field, value,
                     {ProbeTask::kCopy, ProbeTask::kText, ProbeTask::kLookup, ProbeTask::kImage},
                     ProbeTaskName);
}

}  // namespace onboard
