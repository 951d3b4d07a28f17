// ProbeTask: what the training probe's proxy learns (ProbeConfig::task, backends/probe.h): the copy
// task, byte-level text from a file, the key-value lookup task (backends/probe_lookup.h) or the
// image task (backends/probe_image.h). One
// spelling, one parser, one printer; the CLI's --task and the probe JSON go through them.
#pragma once

#include <string>

#include "core/status.h"

namespace onboard {

enum class ProbeTask { kCopy, kText, kLookup, kImage };

const char* ProbeTaskName(ProbeTask t);  // "copy" | "text" | "lookup" | "image"

// `value` (exact spelling, as ProbeTaskName prints it); otherwise kBadInput naming origin, field and
// value: "--task: field 'task': must be copy, text, lookup or image (got sort)".
[[nodiscard]] Expected<ProbeTask> ParseProbeTask(const std::string& origin, const std::string& field,
                                                 const std::string& value);

}  // namespace onboard
