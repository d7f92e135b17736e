#include "worker/data/inflate_cache.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/encoding/coding.h"
#include "common/encoding/crc32c.h"
#include "common/platform/huge_pages.h"
#include "common/platform/logging.h"
#include "common/platform/status_macros.h"
#include "worker/data/idx.h"

namespace shardline {
namespace {

constexpr size_t kTrailer = 4;  // little-endian CRC32C of the bytes before it

std::string Basename(const std::string& path) {
  const size_t slash = path.rfind('/');
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (absl::EndsWith(name, ".gz")) name.resize(name.size() - 3);
  return name;
}

// The copy's bytes without the trailer, if its CRC matches.
bool Sound(std::string* copy) {
  if (copy->size() < kTrailer) return false;
  const uint64_t want = ReadLittleEndian(copy->data() + copy->size() - kTrailer, kTrailer);
  copy->resize(copy->size() - kTrailer);
  return crc32c::Value(copy->data(), copy->size()) == want;
}

absl::StatusOr<std::string> Inflate(Env* env, const std::string& path) {
  ASSIGN_OR_RETURN(std::string compressed, env->ReadFile(path, kMaxDataFileBytes));
  return Gunzip(compressed, path);
}

// A file's bytes, into memory backed by huge pages.
absl::StatusOr<std::string> ReadWhole(Env* env, const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, env->NewRandomAccessFile(path));
  const size_t n = static_cast<size_t>(file->size());
  std::string bytes;
  bytes.reserve(n);
  AdviseHugePages(bytes.data(), n);
  bytes.resize(n);
  RETURN_IF_ERROR(file->ReadExactly(0, n, bytes.data()));
  return bytes;
}

}  // namespace

std::string DefaultCacheDir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && xdg[0] == '/') {
    return absl::StrCat(xdg, "/shardline");
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && home[0] == '/') {
    return absl::StrCat(home, "/.cache/shardline");
  }
  return "";
}

std::string InflateCacheDir(const config::DataConfig& data) {
  if (!data.keep_inflated()) return "";
  return data.cache_dir().empty() ? DefaultCacheDir() : data.cache_dir();
}

absl::StatusOr<std::string> InflateCached(Env* env, const std::string& path, const std::string& cache_dir) {
  if (cache_dir.empty()) return Inflate(env, path);
  // Named by the source's size and the CRC32C of all its bytes: a source
  // with any byte changed (a flipped bit, another release) never matches
  // an old copy. Checksumming the compressed file costs a few ms next to
  // the 0.25 s of inflating it.
  ASSIGN_OR_RETURN(std::string compressed, env->ReadFile(path, kMaxDataFileBytes));
  const std::string copy_path =
      absl::StrFormat("%s/%s.%d-%08x", cache_dir, Basename(path), compressed.size(),
                      crc32c::Value(compressed.data(), compressed.size()));
  if (env->FileExists(copy_path)) {
    compressed = std::string();  // not held beside the copy (read again only if the copy is damaged)
    if (absl::StatusOr<std::string> copy = ReadWhole(env, copy_path); copy.ok()) {
      if (Sound(&*copy)) return std::move(*copy);
      SLOG(WARNING) << copy_path << " is damaged; inflating " << path << " again";
    }
    ASSIGN_OR_RETURN(compressed, env->ReadFile(path, kMaxDataFileBytes));
  }
  ASSIGN_OR_RETURN(std::string raw, Gunzip(compressed, path));
  compressed = std::string();
  std::string crc;
  AppendLittleEndian(&crc, crc32c::Value(raw.data(), raw.size()), kTrailer);
  // Written under a name of this process's, then renamed: processes starting
  // together each write a whole copy, and a reader never sees a part.
  const std::string tmp = absl::StrCat(copy_path, ".tmp.", getpid());
  absl::Status written = env->CreateDirs(cache_dir);
  if (written.ok()) {
    absl::StatusOr<std::unique_ptr<WritableFile>> file = env->NewWritableFile(tmp);
    written = file.status();
    if (written.ok()) written = (*file)->Append(raw);
    if (written.ok()) written = (*file)->Append(crc);
    if (written.ok()) written = (*file)->Close();
    if (written.ok()) written = env->RenameFile(tmp, copy_path);
    if (!written.ok()) env->DeleteFile(tmp).IgnoreError();
  }
  if (!written.ok()) SLOG(WARNING) << "no inflated copy of " << path << " kept: " << written;
  return raw;
}

}  // namespace shardline
