#include "worker/data/dataset.h"

#include "absl/strings/str_cat.h"
#include "common/encoding/sha256.h"
#include "common/platform/status_macros.h"
#include "worker/data/idx.h"
#include "worker/data/inflate_cache.h"
#include "worker/data/tokenizer.h"

namespace shardline {

absl::StatusOr<Dataset> LoadIdxSplit(Env* env, const std::string& images_path,
                                     const std::string& labels_path, int num_classes,
                                     const std::string& cache_dir) {
  ASSIGN_OR_RETURN(IdxArray images, ReadIdxFile(env, images_path, /*want_dims=*/3, cache_dir));  // N, rows, cols
  ASSIGN_OR_RETURN(IdxArray labels, ReadIdxFile(env, labels_path, /*want_dims=*/1, cache_dir));
  if (images.dims[0] != labels.dims[0]) {
    return absl::DataLossError(absl::StrCat(images_path, " has ", images.dims[0], " images but ",
                                            labels_path, " has ", labels.dims[0], " labels"));
  }
  Dataset ds;
  ds.source = absl::StrCat("data.dir ", images_path);
  ds.num_examples = images.dims[0];
  ds.feature_dim = static_cast<int>(images.dims[1] * images.dims[2]);
  ds.height = static_cast<int>(images.dims[1]);
  ds.width = static_cast<int>(images.dims[2]);
  ds.num_classes = num_classes;
  ds.scale = 1.0f / (255.0f * kFashionMnistStd);
  ds.shift = -kFashionMnistMean / kFashionMnistStd;
  ds.pixels = std::move(images.data);
  ds.labels.resize(labels.data.size());
  for (size_t i = 0; i < labels.data.size(); ++i) {
    const int label = static_cast<unsigned char>(labels.data[i]);
    if (label >= num_classes) {
      return absl::DataLossError(absl::StrCat(labels_path, ": label ", label, " of example ", i,
                                              " is not below ", num_classes));
    }
    ds.labels[i] = label;
  }
  return ds;
}

absl::StatusOr<TrainingData> LoadFashionMnist(Env* env, const std::string& dir, const std::string& cache_dir) {
  TrainingData out;
  ASSIGN_OR_RETURN(out.train, LoadIdxSplit(env, dir + "/train-images-idx3-ubyte.gz",
                                           dir + "/train-labels-idx1-ubyte.gz", 10, cache_dir));
  ASSIGN_OR_RETURN(out.test, LoadIdxSplit(env, dir + "/t10k-images-idx3-ubyte.gz",
                                          dir + "/t10k-labels-idx1-ubyte.gz", 10, cache_dir));
  if (out.train.height != out.test.height || out.train.width != out.test.width) {
    return absl::DataLossError(absl::StrCat(dir, ": train images are ", out.train.height, "x", out.train.width,
                                            " but test images are ", out.test.height, "x", out.test.width));
  }
  return out;
}

namespace {

absl::StatusOr<Dataset> LoadTextSplit(Env* env, const std::string& path, int context, int64_t stride,
                                      const char* field) {
  Dataset ds;
  absl::StatusOr<std::string> text = env->ReadFile(path, kMaxDataFileBytes);
  if (!text.ok()) return Annotate(text.status(), absl::StrCat("config field data.text.", field));
  ds.text = std::move(*text);
  const int64_t window = int64_t{context} + 1;
  if (static_cast<int64_t>(ds.text.size()) < window) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.text.", field, ": ", path, ds.text.empty() ? " is empty" : absl::StrCat(" has ", ds.text.size(), " bytes"),
        "; a window of the model's context + 1 = ", window, " bytes is the least it can hold"));
  }
  ds.source = absl::StrCat("data.text.", field, " ", path, " (", ds.text.size(), " bytes: windows of context + 1 = ",
                           window, " bytes, one every ", stride, ")");
  ds.context = context;
  ds.stride = stride;
  ds.num_examples = (static_cast<int64_t>(ds.text.size()) - 1 - context) / stride + 1;
  ds.feature_dim = context;
  ds.height = 1;
  ds.width = context;
  ds.num_classes = 256;
  return ds;
}

}  // namespace

absl::StatusOr<TrainingData> LoadTextSplits(Env* env, const std::string& train_path, const std::string& val_path,
                                            int context) {
  if (context < 1) return absl::InvalidArgumentError(absl::StrCat("a text context of ", context, " bytes"));
  TrainingData out;
  ASSIGN_OR_RETURN(out.train, LoadTextSplit(env, train_path, context, /*stride=*/1, "train_path"));
  ASSIGN_OR_RETURN(out.test, LoadTextSplit(env, val_path, context, /*stride=*/context, "val_path"));
  return out;
}

namespace {

absl::StatusOr<Dataset> TokenSplit(Env* env, const std::string& dir, const TokenManifest& m,
                                   const std::vector<TokenShard>& shards, const char* split, int context,
                                   int64_t stride, TokenCorpusOptions options) {
  // Training windows start anywhere; validation windows tile the split.
  options.access = stride == 1 ? MappedFile::Access::kRandom : MappedFile::Access::kSequential;
  ASSIGN_OR_RETURN(std::unique_ptr<TokenCorpus> corpus, TokenCorpus::Open(env, dir, m, shards, options));
  const int64_t window = int64_t{context} + 1;
  if (corpus->num_tokens() < window) {
    return absl::InvalidArgumentError(absl::StrCat("data.tokens.dir ", dir, ": the ", split, " split has ",
                                                   corpus->num_tokens(), " tokens; a window of the model's context + 1 = ",
                                                   window, " tokens is the least it can hold"));
  }
  Dataset ds;
  ds.source = absl::StrCat("data.tokens.dir ", dir, " (", split, ": ", corpus->num_tokens(), " tokens in ", shards.size(),
                           " shards from ", corpus->text_bytes(), " bytes of text; windows of context + 1 = ", window,
                           " tokens, one every ", stride, ")");
  ds.context = context;
  ds.stride = stride;
  ds.num_examples = (corpus->num_tokens() - 1 - context) / stride + 1;
  ds.feature_dim = context;
  ds.height = 1;
  ds.width = context;
  ds.num_classes = m.vocab_size;
  ds.bytes_per_token = static_cast<double>(corpus->text_bytes()) / static_cast<double>(corpus->num_tokens());
  ds.tokens = std::move(corpus);
  return ds;
}

}  // namespace

absl::StatusOr<TrainingData> LoadTokenSplits(Env* env, const std::string& dir, int context,
                                             const TokenCorpusOptions& options) {
  if (context < 1) return absl::InvalidArgumentError(absl::StrCat("a token context of ", context));
  ASSIGN_OR_RETURN(TokenManifest m, ReadTokenManifest(env, dir));
  TrainingData out;
  const std::string tokenizer_path = absl::StrCat(dir, "/", m.tokenizer_file);
  absl::StatusOr<std::string> model = env->ReadFile(tokenizer_path, kMaxTokenizerFileBytes);
  if (!model.ok()) return Annotate(model.status(), absl::StrCat("the tokenizer of data.tokens.dir ", dir));
  out.tokenizer_model = std::move(*model);
  out.tokenizer_sha256 = Sha256Hex(out.tokenizer_model);
  if (out.tokenizer_sha256 != m.tokenizer_sha256) {
    return absl::DataLossError(absl::StrCat("data.tokens.dir ", dir, ": tokenizer ", tokenizer_path, " has SHA-256 ",
                                            out.tokenizer_sha256, "; field tokenizer.sha256 of the manifest says ",
                                            m.tokenizer_sha256, ": the shards were made with another tokenizer"));
  }
  ASSIGN_OR_RETURN(out.train, TokenSplit(env, dir, m, m.train, "train", context, /*stride=*/1, options));
  ASSIGN_OR_RETURN(out.test, TokenSplit(env, dir, m, m.val, "val", context, /*stride=*/context, options));
  return out;
}

absl::Status KeepTokenizer(Env* env, const TrainingData& data, const std::string& dir) {
  if (data.tokenizer_model.empty()) return absl::OkStatus();
  const std::string path = absl::StrCat(dir, "/", kTokenizerFile);
  if (absl::StatusOr<std::string> kept = env->ReadFile(path, kMaxTokenizerFileBytes);
      kept.ok() && *kept == data.tokenizer_model) {
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(env->CreateDirs(dir));
  return WriteFileAtomically(env, path, data.tokenizer_model, /*durable=*/true);
}

absl::StatusOr<TrainingData> LoadTrainingData(Env* env, const config::JobConfig& config) {
  if (config.data().has_tokens()) {
    if (!config.model().has_gpt()) {
      return absl::InvalidArgumentError("data.tokens is the input of a sequence model: set model.gpt");
    }
    TokenCorpusOptions options;
    options.verify_contents = config.data().tokens().verify();
    return LoadTokenSplits(env, config.data().tokens().dir(), config.model().gpt().context(), options);
  }
  if (!config.data().has_text()) {
    return LoadFashionMnist(env, config.data().dir(), InflateCacheDir(config.data()));
  }
  if (!config.model().has_gpt()) {
    return absl::InvalidArgumentError("data.text is the input of a sequence model: set model.gpt");
  }
  return LoadTextSplits(env, config.data().text().train_path(), config.data().text().val_path(),
                        config.model().gpt().context());
}

}  // namespace shardline
