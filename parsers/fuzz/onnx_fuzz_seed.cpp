// onnx_fuzz_seed IN.onnx OUT.onnx: copies a model with every initializer's data dropped (dims, names,
// nodes and Constant values kept). The structure-recovery code never needs weight data except for
// the tied-head check, so the seed exercises the same paths at a fraction of the size.
#include <fstream>
#include <iostream>
#include <sstream>

#include <onnx/onnx_pb.h>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: onnx_fuzz_seed IN.onnx OUT.onnx\n";
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  onnx::ModelProto m;
  if (!m.ParseFromString(ss.str())) {
    std::cerr << argv[1] << ": not an ONNX model\n";
    return 2;
  }
  for (auto& t : *m.mutable_graph()->mutable_initializer())
    if (t.raw_data().size() > 64) t.clear_raw_data();
  std::ofstream out(argv[2], std::ios::binary | std::ios::trunc);
  if (!m.SerializeToOstream(&out)) return 3;
  return 0;
}
