#include "worker/data/dataset.h"

#include "absl/strings/str_cat.h"
#include "common/platform/status_macros.h"
#include "worker/data/idx.h"
#include "worker/data/inflate_cache.h"

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

absl::StatusOr<TrainingData> LoadTrainingData(Env* env, const config::JobConfig& config) {
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
