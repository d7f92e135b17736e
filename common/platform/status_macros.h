// RETURN_IF_ERROR / ASSIGN_OR_RETURN, which Abseil 20220623 lacks.
//
//   RETURN_IF_ERROR(file->Sync());
//   ASSIGN_OR_RETURN(Dataset train, ReadIdxPair(env, images, labels));
#ifndef SHARDLINE_COMMON_PLATFORM_STATUS_MACROS_H_
#define SHARDLINE_COMMON_PLATFORM_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define SHARDLINE_CONCAT_INNER_(a, b) a##b
#define SHARDLINE_CONCAT_(a, b) SHARDLINE_CONCAT_INNER_(a, b)

#define RETURN_IF_ERROR(expr)                        \
  do {                                               \
    ::absl::Status _shardline_status = (expr);       \
    if (!_shardline_status.ok()) return _shardline_status; \
  } while (0)

#define ASSIGN_OR_RETURN(lhs, expr) \
  SHARDLINE_ASSIGN_OR_RETURN_IMPL_( \
      SHARDLINE_CONCAT_(_shardline_statusor_, __LINE__), lhs, expr)

#define SHARDLINE_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                      \
  if (!statusor.ok()) return std::move(statusor).status();     \
  lhs = std::move(statusor).value()

namespace shardline {

// Returns `status` with `context + ": "` prepended to its message, keeping its
// code and payloads (an errno payload still answers IsOutOfDescriptors). OK
// stays OK.
absl::Status Annotate(const absl::Status& status, absl::string_view context);

}  // namespace shardline

#endif  // SHARDLINE_COMMON_PLATFORM_STATUS_MACROS_H_
