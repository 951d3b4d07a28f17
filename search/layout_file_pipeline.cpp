// Megatron pipeline layouts (--pipeline-model-parallel-layout, e.g. "Et*4|(t*4|)*14tmL") to the
// first decoder layer of each pipeline chunk. Symbols: E embedding, t decoder layer, m MTP layer,
// L loss/head, | chunk boundary; "X*N" repeats one symbol, "(...)*N" repeats a group.
// Chunk c runs on pipeline rank c % pp (virtual stage c / pp), as in Megatron-Core.
#include <algorithm>
#include <cctype>

#include "search/layout_file_fields.h"

namespace onboard::layout {
namespace {

// Expands repeats; returns false (and a reason) on a malformed string.
bool Expand(const std::string& s, size_t* i, int depth, std::string* out, std::string* why) {
  if (depth > 8) return *why = "nested too deep", false;
  while (*i < s.size()) {
    const char c = s[*i];
    std::string unit;
    if (c == ')') return true;
    if (c == '(') {
      ++*i;
      if (!Expand(s, i, depth + 1, &unit, why)) return false;
      if (*i >= s.size() || s[*i] != ')') return *why = "unclosed '('", false;
      ++*i;
    } else if (c == 'E' || c == 't' || c == 'm' || c == 'L' || c == '|') {
      unit = std::string(1, c);
      ++*i;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      ++*i;
      continue;
    } else {
      return *why = std::string("unknown symbol '") + c + "'", false;
    }
    int64_t n = 1;
    if (*i < s.size() && s[*i] == '*') {
      ++*i;
      n = 0;
      while (*i < s.size() && std::isdigit(static_cast<unsigned char>(s[*i])) && n < 100000) n = n * 10 + (s[(*i)++] - '0');
      if (n < 1) return *why = "'*' needs a positive count", false;
    }
    if (out->size() + unit.size() * static_cast<size_t>(n) > 1000000) return *why = "expands too far", false;
    for (int64_t k = 0; k < n; ++k) *out += unit;
  }
  return depth == 0 || (*why = "unclosed '('", false);
}

}  // namespace

Status ParsePipelineLayout(const std::string& text, int64_t chunks, const Fields& f, const std::string& key,
                           std::vector<int64_t>* starts, int64_t* mtp_layers,
                           int64_t* decoder_layers) {
  // Step 1: expand repeats.
  std::string flat, why;
  size_t i = 0;
  if (!Expand(text, &i, 0, &flat, &why) || i != text.size())
    return BadInput(f.origin(), f.path() + key, why.empty() ? "unbalanced ')'" : why, text);
  // Step 2: walk the chunks, counting decoder layers before each.
  std::vector<int64_t> out = {0};
  int64_t layers = 0, mtp = 0, chunk = 0;
  bool emb_ok = true, loss_last = false;
  for (char c : flat) {
    if (c == '|') {
      out.push_back(layers);
      ++chunk;
    } else if (c == 't') {
      ++layers;
    } else if (c == 'm') {
      ++mtp;
    } else if (c == 'E') {
      emb_ok = emb_ok && chunk == 0;
    } else if (c == 'L') {
      loss_last = true;
    }
  }
  // Step 3: checks. The cost model puts embedding on chunk 0 and MTP + loss on the last chunk.
  if (static_cast<int64_t>(out.size()) != chunks)
    return BadInput(f.origin(), f.path() + key,
                    "has " + std::to_string(out.size()) + " chunks, needs pp*vp=" + std::to_string(chunks), text);
  if (!emb_ok) return BadInput(f.origin(), f.path() + key, "E (embedding) must be in the first chunk", text);
  const size_t last_bar = flat.rfind('|');
  const std::string tail = last_bar == std::string::npos ? flat : flat.substr(last_bar + 1);
  if (!loss_last || tail.find('L') == std::string::npos)
    return BadInput(f.origin(), f.path() + key, "L (loss) must be in the last chunk", text);
  if (mtp > 0 && static_cast<int64_t>(std::count(tail.begin(), tail.end(), 'm')) != mtp)
    return BadInput(f.origin(), f.path() + key, "m (MTP layers) must be in the last chunk", text);
  *starts = out;
  *mtp_layers = mtp;
  *decoder_layers = layers;
  return Status::Ok();
}

}  // namespace onboard::layout
