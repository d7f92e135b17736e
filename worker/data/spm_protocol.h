// The pipe protocol between shardline and `shardline-spm`, the helper
// process that runs Debian's SentencePiece.
//
// Why a process: Debian's libsentencepiece carries its own copy of
// protobuf-lite 3.14 and exports its symbols, so in a process that also
// loads libprotobuf 3.21 (every shardline binary) one of the two copies'
// static initialisers runs against the other's code and the process dies
// before main(). (RTLD_DEEPBIND would isolate it, but the sanitizers this
// project tests under refuse it.) The helper links SentencePiece and
// nothing of protobuf's; shardline talks to it over its stdin and stdout.
//
// Every integer is little-endian. A request is one byte, the op, and its
// body; every reply starts with a u32 status, 0 for success, else a u32
// length and that many bytes of error text.
//   'T' train:  u32 seed, u32 flag count, per flag (u32 len, name, u32 len,
//               value) -> u64 length, the serialized model
//   'L' load:   u64 length, a serialized model -> i32 vocabulary size, per
//               piece (u8 kind, u32 length, the piece's text as
//               SentencePiece spells it: U+2581 for a space)
//   'E' encode: u32 length, text -> u32 count, that many i32 ids
// The helper exits 0 at end of input between requests, 1 on anything else.
#ifndef SHARDLINE_WORKER_DATA_SPM_PROTOCOL_H_
#define SHARDLINE_WORKER_DATA_SPM_PROTOCOL_H_

#include <cstdint>

namespace shardline {
namespace spm {

inline constexpr char kOpTrain = 'T';
inline constexpr char kOpLoad = 'L';
inline constexpr char kOpEncode = 'E';

enum PieceKind : uint8_t { kNormal = 0, kByte = 1, kControl = 2, kUnknown = 3 };

// Bounds on what either side accepts, so a broken peer cannot make the
// other allocate without limit.
inline constexpr uint64_t kMaxModelBytes = uint64_t{256} << 20;
inline constexpr uint32_t kMaxTextBytes = uint32_t{64} << 20;
inline constexpr uint32_t kMaxMessageBytes = uint32_t{1} << 20;

}  // namespace spm
}  // namespace shardline

#endif  // SHARDLINE_WORKER_DATA_SPM_PROTOCOL_H_
