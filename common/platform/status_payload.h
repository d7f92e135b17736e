// An integer carried by an absl::Status as a payload, so code can decide on
// what a status names (a rank, a step) without reading its message.
//
//   absl::Status s = WithIntPayload(absl::InternalError("..."), kUrl, 3);
//   IntPayload(s, kUrl) == 3; IntPayload(absl::OkStatus(), kUrl) == -1
#ifndef SHARDLINE_COMMON_PLATFORM_STATUS_PAYLOAD_H_
#define SHARDLINE_COMMON_PLATFORM_STATUS_PAYLOAD_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"

namespace shardline {

// `status` with `value` under the type URL `url`.
inline absl::Status WithIntPayload(absl::Status status, absl::string_view url, int64_t value) {
  status.SetPayload(url, absl::Cord(std::to_string(value)));
  return status;
}

// The value under `url`, or `absent` if there is none (or it is not a number).
inline int64_t IntPayload(const absl::Status& status, absl::string_view url, int64_t absent = -1) {
  const auto payload = status.GetPayload(url);  // absl::optional<absl::Cord>
  int64_t value = absent;
  if (!payload.has_value() || !absl::SimpleAtoi(std::string(*payload), &value)) return absent;
  return value;
}

}  // namespace shardline

#endif  // SHARDLINE_COMMON_PLATFORM_STATUS_PAYLOAD_H_
