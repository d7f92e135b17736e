// SentencePiece for the helper process `shardline-spm` (spm_protocol.h),
// the one place its headers are included. Debian's sentencepiece_processor.h
// declares its own `absl::string_view` (a using of std::string_view), which
// clashes with Debian's Abseil (a class of its own), so this interface is
// plain C++: errors come back as text.
#ifndef SHARDLINE_WORKER_DATA_SPM_BRIDGE_H_
#define SHARDLINE_WORKER_DATA_SPM_BRIDGE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace shardline {
namespace spm {

// SentencePieceTrainer::Train with these flags (its command-line flags,
// without the dashes) and the random seed its sampling uses, reading the
// lines of `inputs` in order (streamed; the model does not record where
// they came from, so the same bytes under other names train the same
// model). On success returns "" and the serialized model in *model; else
// the trainer's error.
std::string Train(const std::vector<std::string>& inputs, const std::map<std::string, std::string>& flags,
                  uint32_t seed, std::string* model);

// A loaded model. Encode is thread-compatible (const).
class Processor {
 public:
  Processor();
  ~Processor();
  // "" or the loader's error.
  std::string Load(std::string_view serialized_model);
  // Piece ids of `text`, appended to *ids, each line ("\n" ends one) encoded
  // on its own, so the ids of a text are its lines' ids in order whatever
  // the text was cut into (a whole text's Viterbi breaks ties between
  // equal segmentations by position). "" or the encoder's error.
  std::string Encode(std::string_view text, std::vector<int>* ids) const;
  int size() const;
  // The piece's text, with SentencePiece's U+2581 for a space.
  std::string Piece(int id) const;
  bool IsByte(int id) const;      // a byte-fallback piece <0xNN>
  bool IsControl(int id) const;   // <s>, </s>, padding
  bool IsUnknown(int id) const;   // <unk>

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace spm
}  // namespace shardline

#endif  // SHARDLINE_WORKER_DATA_SPM_BRIDGE_H_
