// shardline-spm: SentencePiece in a process of its own (spm_protocol.h says
// why and how it is spoken to). Not for people: shardline starts it.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "worker/data/spm_bridge.h"
#include "worker/data/spm_protocol.h"

namespace shardline {
namespace spm {
namespace {

// false at end of input before any byte (clean), exits on a partial read.
bool ReadAll(void* dst, size_t n, bool eof_ok = false) {
  auto* p = static_cast<char*>(dst);
  size_t got = 0;
  while (got < n) {
    const ssize_t r = read(0, p + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      if (r == 0 && got == 0 && eof_ok) return false;
      std::fprintf(stderr, "shardline-spm: input ended inside a request\n");
      _exit(1);
    }
    got += static_cast<size_t>(r);
  }
  return true;
}

void WriteAll(const void* src, size_t n) {
  const auto* p = static_cast<const char*>(src);
  while (n > 0) {
    const ssize_t w = write(1, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) _exit(1);  // shardline went away
    p += w;
    n -= static_cast<size_t>(w);
  }
}

template <typename T>
T Read() {
  T v{};
  ReadAll(&v, sizeof(v));
  return v;
}

template <typename T>
void Write(T v) {
  WriteAll(&v, sizeof(v));
}

std::string ReadBytes(uint64_t n, uint64_t max) {
  if (n > max) {
    std::fprintf(stderr, "shardline-spm: a request of %llu bytes, over %llu\n", static_cast<unsigned long long>(n),
                 static_cast<unsigned long long>(max));
    _exit(1);
  }
  std::string s(static_cast<size_t>(n), '\0');
  ReadAll(s.data(), s.size());
  return s;
}

void Fail(const std::string& error) {
  Write<uint32_t>(1);
  const std::string e = error.substr(0, kMaxMessageBytes);
  Write<uint32_t>(static_cast<uint32_t>(e.size()));
  WriteAll(e.data(), e.size());
}

int Serve() {
  Processor sp;
  bool loaded = false;
  std::vector<int> ids;
  std::vector<int32_t> out;
  for (;;) {
    char op = 0;
    if (!ReadAll(&op, 1, /*eof_ok=*/true)) return 0;
    if (op == kOpTrain) {
      const auto seed = Read<uint32_t>();
      const auto count = Read<uint32_t>();
      std::map<std::string, std::string> flags;
      for (uint32_t i = 0; i < count && i < 1000; ++i) {
        std::string name = ReadBytes(Read<uint32_t>(), kMaxMessageBytes);
        flags[name] = ReadBytes(Read<uint32_t>(), kMaxMessageBytes);
      }
      // The inputs are read here, line by line, not by the trainer (which
      // would record their names in the model).
      std::vector<std::string> inputs;
      const std::string list = flags["input"];
      flags.erase("input");
      for (size_t begin = 0; begin <= list.size();) {
        size_t end = list.find(',', begin);
        if (end == std::string::npos) end = list.size();
        if (end > begin) inputs.push_back(list.substr(begin, end - begin));
        begin = end + 1;
      }
      std::string model;
      const std::string error = Train(inputs, flags, seed, &model);
      if (!error.empty()) {
        Fail(error);
        continue;
      }
      Write<uint32_t>(0);
      Write<uint64_t>(model.size());
      WriteAll(model.data(), model.size());
    } else if (op == kOpLoad) {
      const std::string model = ReadBytes(Read<uint64_t>(), kMaxModelBytes);
      const std::string error = sp.Load(model);
      if (!error.empty()) {
        Fail(error);
        continue;
      }
      loaded = true;
      Write<uint32_t>(0);
      Write<int32_t>(sp.size());
      for (int id = 0; id < sp.size(); ++id) {
        const PieceKind kind = sp.IsByte(id) ? kByte : sp.IsUnknown(id) ? kUnknown : sp.IsControl(id) ? kControl : kNormal;
        const std::string piece = sp.Piece(id);
        Write<uint8_t>(kind);
        Write<uint32_t>(static_cast<uint32_t>(piece.size()));
        WriteAll(piece.data(), piece.size());
      }
    } else if (op == kOpEncode) {
      const std::string text = ReadBytes(Read<uint32_t>(), kMaxTextBytes);
      if (!loaded) {
        Fail("encode before a model was loaded");
        continue;
      }
      ids.clear();
      const std::string error = sp.Encode(text, &ids);
      if (!error.empty()) {
        Fail(error);
        continue;
      }
      out.assign(ids.begin(), ids.end());
      Write<uint32_t>(0);
      Write<uint32_t>(static_cast<uint32_t>(out.size()));
      WriteAll(out.data(), out.size() * sizeof(int32_t));
    } else {
      std::fprintf(stderr, "shardline-spm: unknown request %d\n", op);
      return 1;
    }
  }
}

}  // namespace
}  // namespace spm
}  // namespace shardline

int main(int argc, char** argv) {
  if (argc != 2 || std::strcmp(argv[1], "serve") != 0) {
    std::fprintf(stderr, "usage: shardline-spm serve  (started by shardline; speaks worker/data/spm_protocol.h)\n");
    return 2;
  }
  return shardline::spm::Serve();
}
