// Key-value lookup task of the probe (`onboard probe --task lookup`): a task that needs the MoE
// experts' memory, so that a broken router (the random_router control, probe_controls.h) fails the
// learning verdict. The copy task cannot show that: attention alone copies.
//
//   table     one fixed random table y = Y[a][b] over keys a, b in [0, keys) with values in
//             [0, values), drawn once from kLookupTableSeed (the task, not the run: every seed,
//             rank and layout sees the same table)
//   sequence  [BOS, a1, b1, y1, a2, b2, y2, ...]: n = LookupTriples(seq) triples of uniformly drawn
//             keys, then filler; the loss and the exact-match accuracy count only the y targets
//             (predicted at b's position, from the two tokens before it)
//   bytes     a = 'A' + a, b = 'a' + b, y = 128 + y, BOS '\n', filler = a random key byte
//   baselines no-learning = the unigram entropy of the table's values (a, b uniform: exactly the
//             entropy of the value counts over the keys x keys cells); floor 0 (the table is a
//             function of (a, b)). An additive model (embeddings of a and b summed, then linear)
//             cannot represent a random table: the pair needs a non-linear memory of keys^2
//             cells, which a MoE layer holds across its experts when the router sends each
//             region of the table to its own experts; with random routing every expert would
//             have to hold the whole table.
// Units: tokens; entropies in nats per counted target.
#pragma once

#include <cstdint>
#include <vector>

namespace onboard::backends {

inline constexpr uint64_t kLookupTableSeed = 0x10c4u;
inline constexpr int64_t kLookupMaxKeys = 26;     // 'A'..'Z' and 'a'..'z'
inline constexpr int64_t kLookupMaxValues = 127;  // bytes 128..254

// Triples per sequence of `seq` tokens (seq + 1 with the shifted target).
inline int64_t LookupTriples(int64_t seq) { return seq / 3; }

// values_of[a * keys + b] = Y[a][b]; deterministic in (keys, values).
std::vector<int64_t> LookupTable(int64_t keys, int64_t values);

// Entropy of the table's values with uniform keys (nats): the no-learning baseline.
double LookupUnigramNats(const std::vector<int64_t>& table, int64_t values);

}  // namespace onboard::backends
