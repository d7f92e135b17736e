#include "worker/data/spm_bridge.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <fstream>
#include <unordered_map>

namespace shardline {
namespace spm {

namespace {

// The lines of some files, in order, without their "\n".
class LinesIterator : public sentencepiece::SentenceIterator {
 public:
  explicit LinesIterator(const std::vector<std::string>& files) : files_(files) { Next(); }
  bool done() const override { return done_; }
  void Next() override {
    while (!done_) {
      if (in_.is_open() && std::getline(in_, line_)) return;
      if (in_.is_open() && in_.bad()) {
        status_ = sentencepiece::util::Status(sentencepiece::util::StatusCode::kInternal, "reading " + files_[next_ - 1]);
        done_ = true;
        return;
      }
      in_.close();
      if (next_ == files_.size()) {
        done_ = true;
        return;
      }
      in_.open(files_[next_++], std::ios::binary);
      if (!in_.is_open()) {
        status_ = sentencepiece::util::Status(sentencepiece::util::StatusCode::kNotFound,
                                              "cannot open " + files_[next_ - 1]);
        done_ = true;
      }
    }
  }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override { return status_; }

 private:
  const std::vector<std::string>& files_;
  size_t next_ = 0;
  std::ifstream in_;
  std::string line_;
  bool done_ = false;
  sentencepiece::util::Status status_;
};

}  // namespace

std::string Train(const std::vector<std::string>& inputs, const std::map<std::string, std::string>& flags,
                  uint32_t seed, std::string* model) {
  sentencepiece::SetRandomGeneratorSeed(seed);
  const std::unordered_map<std::string, std::string> kwargs(flags.begin(), flags.end());
  LinesIterator lines(inputs);
  const sentencepiece::util::Status s = sentencepiece::SentencePieceTrainer::Train(kwargs, &lines, model);
  if (!lines.status().ok()) return lines.status().ToString();
  return s.ok() ? "" : s.ToString();
}

struct Processor::Impl {
  sentencepiece::SentencePieceProcessor sp;
};

Processor::Processor() : impl_(std::make_unique<Impl>()) {}
Processor::~Processor() = default;

std::string Processor::Load(std::string_view serialized_model) {
  const sentencepiece::util::Status s = impl_->sp.LoadFromSerializedProto(serialized_model);
  return s.ok() ? "" : s.ToString();
}

std::string Processor::Encode(std::string_view text, std::vector<int>* ids) const {
  std::vector<int> part;
  for (size_t begin = 0; begin < text.size();) {
    size_t end = text.find('\n', begin);
    end = end == std::string_view::npos ? text.size() : end + 1;
    const sentencepiece::util::Status s = impl_->sp.Encode(text.substr(begin, end - begin), &part);
    if (!s.ok()) return s.ToString();
    ids->insert(ids->end(), part.begin(), part.end());
    begin = end;
  }
  return "";
}

int Processor::size() const { return impl_->sp.GetPieceSize(); }
std::string Processor::Piece(int id) const { return impl_->sp.IdToPiece(id); }
bool Processor::IsByte(int id) const { return impl_->sp.IsByte(id); }
bool Processor::IsControl(int id) const { return impl_->sp.IsControl(id); }
bool Processor::IsUnknown(int id) const { return impl_->sp.IsUnknown(id); }

}  // namespace spm
}  // namespace shardline
