#include "worker/checkpoint/safetensors.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace shardline {
namespace {

// A file: 8-byte little-endian length, `header` as given, then `data_bytes`
// bytes of data (float i holds i + 0.5).
std::string FileWith(const std::string& header, size_t data_bytes) {
  std::string out(8, '\0');
  const uint64_t len = header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>(len >> (8 * i));
  out += header;
  std::vector<float> values(data_bytes / 4);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) + 0.5f;
  out.append(reinterpret_cast<const char*>(values.data()), values.size() * 4);
  out.resize(8 + header.size() + data_bytes, '\0');
  return out;
}

FlatLayout TwoTensors() {
  FlatLayout layout;
  layout.Add("layer0/w", {2, 3});
  layout.Add("layer0/b", {3});
  return layout;
}

// The checkpoint's tensor table of `layout`.
std::vector<state::TensorEntry> Entries(const FlatLayout& layout) {
  std::vector<state::TensorEntry> tensors;
  for (const TensorInfo& t : layout.tensors()) {
    state::TensorEntry e;
    e.set_name(t.name);
    for (int64_t d : t.shape) e.add_shape(d);
    e.set_offset(t.offset);
    tensors.push_back(e);
  }
  return tensors;
}

std::string WriteTemp(const std::string& name, const std::string& bytes) {
  const std::string path = ::testing::TempDir() + "/safetensors_test_" + name;
  EXPECT_TRUE(WriteFileAtomically(Env::Default(), path, bytes).ok());
  return path;
}

TEST(SafetensorsTest, RoundTripsWhatTheWriterWrites) {
  const FlatLayout layout = TwoTensors();
  std::vector<float> params(static_cast<size_t>(layout.total_size()));
  for (size_t i = 0; i < params.size(); ++i) params[i] = 0.25f * static_cast<float>(i);
  const std::vector<state::TensorEntry> tensors = Entries(layout);
  const std::string bytes = SafetensorsBytes(tensors, params, {{"format", "pt"}});
  absl::StatusOr<SafetensorsHeader> header = ParseSafetensors(bytes, "x");
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(header->metadata.at("format"), "pt");
  EXPECT_EQ(header->tensors.size(), 2u);
  std::vector<float> back(params.size(), -1);
  ASSERT_TRUE(ReadSafetensorsInto(Env::Default(), WriteTemp("roundtrip", bytes), layout, back.data()).ok());
  EXPECT_EQ(back, params);
}

// An export maps in place (its data is the flat buffer); a file with the
// tensors in another order is copied into the layout's order.
TEST(SafetensorsTest, MapsAnExportInPlaceAndCopiesAnotherOrder) {
  const FlatLayout layout = TwoTensors();
  std::vector<float> params(static_cast<size_t>(layout.total_size()));
  for (size_t i = 0; i < params.size(); ++i) params[i] = 0.25f * static_cast<float>(i);
  const std::vector<state::TensorEntry> tensors = Entries(layout);
  absl::StatusOr<MappedParams> m =
      MapSafetensors(Env::Default(), WriteTemp("mapped", SafetensorsBytes(tensors, params, {})), layout);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->in_place());
  EXPECT_EQ(std::vector<float>(m->params, m->params + params.size()), params);

  // The bias first: data offsets that are not the layout's.
  const std::string header =
      "{\"layer0/b\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]},"
      "\"layer0/w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[12,36]}}    ";
  absl::StatusOr<MappedParams> c = MapSafetensors(Env::Default(), WriteTemp("reordered", FileWith(header, 36)), layout);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->in_place());
  EXPECT_EQ(std::vector<float>(c->params, c->params + 9),
            (std::vector<float>{3.5f, 4.5f, 5.5f, 6.5f, 7.5f, 8.5f, 0.5f, 1.5f, 2.5f}));
  // Another model is refused as ReadSafetensorsInto refuses it.
  FlatLayout other;
  other.Add("layer0/w", {3, 2});
  other.Add("layer0/b", {3});
  EXPECT_EQ(MapSafetensors(Env::Default(), WriteTemp("reordered", FileWith(header, 36)), other).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(SafetensorsTest, AcceptsAnyValidJsonSpacing) {
  const std::string header =
      "{ \"layer0/b\" : { \"dtype\" : \"F32\", \"shape\" : [ 3 ], \"data_offsets\" : [ 24, 36 ] },\n"
      "  \"layer0/w\": {\"data_offsets\": [0, 24], \"shape\": [2, 3], \"dtype\": \"F32\"} }";
  std::vector<float> params(9, -1);
  absl::Status s = ReadSafetensorsInto(Env::Default(), WriteTemp("spacing", FileWith(header, 36)), TwoTensors(),
                                       params.data());
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(params[0], 0.5f);
  EXPECT_EQ(params[8], 8.5f);
}

struct Malformed {
  const char* name;
  std::string file;
};

std::vector<Malformed> MalformedFiles() {
  const std::string ok_b = "\"layer0/b\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[24,36]}";
  auto with_w = [&](const std::string& w) { return FileWith("{" + w + "," + ok_b + "}", 36); };
  std::string long_header = FileWith("{}", 0);
  long_header[0] = static_cast<char>(200);  // says 200 header bytes; the file has 2
  return {
      {"negative_offset", with_w("\"layer0/w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[-24,0]}")},
      {"negative_dim", with_w("\"layer0/w\":{\"dtype\":\"F32\",\"shape\":[-2,-3],\"data_offsets\":[0,24]}")},
      {"fractional_offset", with_w("\"layer0/w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0.5,24]}")},
      {"offsets_past_end", with_w("\"layer0/w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[24,48]}")},
      {"overlapping", with_w("\"layer0/w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[12,36]}")},
      {"wrong_length", with_w("\"layer0/w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]}")},
      {"begin_after_end", with_w("\"layer0/w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[24,0]}")},
      {"unknown_dtype", with_w("\"layer0/w\":{\"dtype\":\"F31\",\"shape\":[2,3],\"data_offsets\":[0,24]}")},
      {"no_dtype", with_w("\"layer0/w\":{\"shape\":[2,3],\"data_offsets\":[0,24]}")},
      {"one_offset", with_w("\"layer0/w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0]}")},
      {"duplicate_name", with_w("\"layer0/b\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}")},
      {"huge_shape", with_w("\"layer0/w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,24]}")},
      {"hole", FileWith("{" + ok_b + "}", 36)},
      {"not_json", FileWith("{\"layer0/w\":", 36)},
      {"not_an_object", FileWith("[1,2,3]", 0)},
      {"bad_metadata", FileWith("{\"__metadata__\":{\"step\":5}}", 0)},
      {"header_longer_than_file", long_header},
      {"too_short", std::string(5, '\0')},
  };
}

TEST(SafetensorsTest, RejectsEveryMalformedFileNamingIt) {
  for (const Malformed& m : MalformedFiles()) {
    absl::StatusOr<SafetensorsHeader> header = ParseSafetensors(m.file, m.name);
    EXPECT_TRUE(absl::IsDataLoss(header.status())) << m.name << ": " << header.status();
    EXPECT_TRUE(absl::StrContains(header.status().message(), m.name)) << header.status();
    // And through the reader, which must not touch the parameters.
    std::vector<float> params(9, -1);
    absl::Status s = ReadSafetensorsInto(Env::Default(), WriteTemp(m.name, m.file), TwoTensors(), params.data());
    EXPECT_FALSE(s.ok()) << m.name;
    EXPECT_EQ(params, std::vector<float>(9, -1)) << m.name;
  }
}

TEST(SafetensorsTest, RefusesAnotherModelNamingTheTensor) {
  const std::string b = "\"layer0/b\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[24,36]}";
  const std::string path = WriteTemp("other_model", FileWith("{" + b + ",\"layer0/w\":{\"dtype\":\"F32\",\"shape\":[3,2],\"data_offsets\":[0,24]}}", 36));
  std::vector<float> params(9);
  absl::Status s = ReadSafetensorsInto(Env::Default(), path, TwoTensors(), params.data());
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "layer0/w")) << s;

  const std::string missing = WriteTemp("missing", FileWith("{" + b + ",\"other\":{\"dtype\":\"I32\",\"shape\":[6],\"data_offsets\":[0,24]}}", 36));
  s = ReadSafetensorsInto(Env::Default(), missing, TwoTensors(), params.data());
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "has no tensor layer0/w")) << s;

  const std::string f16 = WriteTemp("f16", FileWith("{\"layer0/b\":{\"dtype\":\"F16\",\"shape\":[6],\"data_offsets\":[24,36]},\"layer0/w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}", 36));
  s = ReadSafetensorsInto(Env::Default(), f16, TwoTensors(), params.data());
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
}

}  // namespace
}  // namespace shardline
