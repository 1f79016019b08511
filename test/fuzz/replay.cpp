//===- replay.cpp - runs a fuzz target over saved inputs (no fuzzer needed) ------===//
//
// usage: REPLAY FILE|DIR ...   Each file (each file of a directory) is one input, as the
// fuzzer found or kept it; a crash or a trap fails the run. Built with any compiler, so that
// ctest replays the corpus without clang.
//
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <dirent.h>
#include <fstream>
#include <iterator>
#include <string>
#include <sys/stat.h>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv) {
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    struct stat st;
    if (::stat(argv[i], &st) != 0) {
      std::fprintf(stderr, "replay: '%s' does not exist\n", argv[i]);
      return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
      files.push_back(argv[i]);
      continue;
    }
    if (DIR *d = opendir(argv[i])) {
      while (dirent *e = readdir(d))
        if (e->d_name[0] != '.')
          files.push_back(std::string(argv[i]) + "/" + e->d_name);
      closedir(d);
    }
  }
  for (const std::string &f : files) {
    std::ifstream in(f, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size());
  }
  std::printf("replayed %zu inputs\n", files.size());
  return files.empty() ? 1 : 0;
}
