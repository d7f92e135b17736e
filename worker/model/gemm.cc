#include "worker/model/gemm.h"

#include <cblas.h>

#include <atomic>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "common/platform/clock.h"
#include "oneapi/dnnl/dnnl.hpp"

// OpenMP runs oneDNN's threads (Debian's libdnnl is built with it). Declared
// here rather than through <omp.h>, which not every compiler here ships.
extern "C" void omp_set_num_threads(int threads);

namespace shardline {
namespace {

using dnnl::memory;

// The thread count SetBlasThreads asked for; 0: the libraries' defaults.
std::atomic<int> g_threads{0};

// OpenMP's thread count is per calling thread: each thread that runs a
// bfloat16 product takes the latest SetBlasThreads value before it does.
void FollowThreadCount() {
  thread_local int applied = 0;
  const int want = g_threads.load(std::memory_order_relaxed);
  if (want > 0 && want != applied) {
    omp_set_num_threads(want);
    applied = want;
  }
}

const dnnl::engine& Engine() {
  static const dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

// Rounds rows x cols floats of `src` (row stride ld) to packed bfloat16
// bits in `dst` (row stride cols). Vectorized for AVX-512, which every CPU
// that passes CheckPrecisionSupported has; element by element the same
// arithmetic as BfloatRound.
__attribute__((target("avx512f,avx512bw"))) void RoundRows(const float* src, int rows, int cols, int ld,
                                                            uint16_t* dst) {
  for (int r = 0; r < rows; ++r) {
    const uint32_t* in = reinterpret_cast<const uint32_t*>(src + static_cast<int64_t>(r) * ld);
    uint16_t* out = dst + static_cast<int64_t>(r) * cols;
    for (int j = 0; j < cols; ++j) {
      uint32_t u = in[j];
      const uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);
      u = (u & 0x7fffffffu) > 0x7f800000u ? (u | 0x00400000u) : rounded;
      out[j] = static_cast<uint16_t>(u >> 16);
    }
  }
}

// One shape's matmul: bfloat16 A and B (packed in their stored
// orientation), float32 C with stride ldc (the caller's C, or scratch of
// stride n), made once and reused.
struct BfloatMatmul {
  memory::desc a, b, c;
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
};

using ShapeKey = std::tuple<bool, bool, int, int, int, int>;  // trans_a, trans_b, m, n, k, ldc

std::unique_ptr<BfloatMatmul> MakeMatmul(bool trans_a, bool trans_b, int m, int n, int k, int ldc) {
  auto mm = std::make_unique<BfloatMatmul>();
  // A packed as stored: m x k (row stride k), or k x m read transposed.
  mm->a = trans_a ? memory::desc({m, k}, memory::data_type::bf16, memory::dims{1, m})
                  : memory::desc({m, k}, memory::data_type::bf16, memory::dims{k, 1});
  mm->b = trans_b ? memory::desc({k, n}, memory::data_type::bf16, memory::dims{1, k})
                  : memory::desc({k, n}, memory::data_type::bf16, memory::dims{n, 1});
  mm->c = memory::desc({m, n}, memory::data_type::f32, memory::dims{ldc, 1});
  mm->pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(mm->a, mm->b, mm->c), Engine());
  mm->prim = dnnl::matmul(mm->pd);
  return mm;
}

// This thread's matmuls by shape, its stream and its bfloat16 operands.
struct ThreadState {
  std::map<ShapeKey, std::unique_ptr<BfloatMatmul>> matmuls;
  std::unique_ptr<dnnl::stream> stream;
  std::vector<uint16_t> a, b;
  std::vector<float> c;
};

ThreadState& State() {
  thread_local ThreadState state;
  if (state.stream == nullptr) state.stream = std::make_unique<dnnl::stream>(Engine());
  return state;
}

BfloatMatmul& MatmulFor(ThreadState& st, bool trans_a, bool trans_b, int m, int n, int k, int ldc) {
  std::unique_ptr<BfloatMatmul>& mm = st.matmuls[ShapeKey(trans_a, trans_b, m, n, k, ldc)];
  if (mm == nullptr) mm = MakeMatmul(trans_a, trans_b, m, n, k, ldc);
  return *mm;
}

void BfloatGemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                const float* b, int ldb, float beta, float* c, int ldc) {
  FollowThreadCount();
  ThreadState& st = State();
  st.a.resize(static_cast<size_t>(m) * k);
  st.b.resize(static_cast<size_t>(k) * n);
  if (trans_a) {
    RoundRows(a, k, m, lda, st.a.data());
  } else {
    RoundRows(a, m, k, lda, st.a.data());
  }
  if (trans_b) {
    RoundRows(b, n, k, ldb, st.b.data());
  } else {
    RoundRows(b, k, n, ldb, st.b.data());
  }
  // The product straight into C when nothing is left to apply; else into
  // scratch, then C = alpha * product + beta * C in float32.
  const bool direct = alpha == 1.0f && beta == 0.0f;
  float* out = c;
  if (!direct) {
    st.c.resize(static_cast<size_t>(m) * n);
    out = st.c.data();
  }
  BfloatMatmul& mm = MatmulFor(st, trans_a, trans_b, m, n, k, direct ? ldc : n);
  memory a_mem(mm.a, Engine(), st.a.data());
  memory b_mem(mm.b, Engine(), st.b.data());
  memory c_mem(mm.c, Engine(), out);
  mm.prim.execute(*st.stream, {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, c_mem}});
  st.stream->wait();
  if (direct) return;
  for (int i = 0; i < m; ++i) {
    const float* p = out + static_cast<int64_t>(i) * n;
    float* row = c + static_cast<int64_t>(i) * ldc;
    if (beta == 0.0f) {
      for (int j = 0; j < n; ++j) row[j] = alpha * p[j];
    } else {
      for (int j = 0; j < n; ++j) row[j] = alpha * p[j] + beta * row[j];
    }
  }
}

}  // namespace

const char* PrecisionName(Precision p) { return p == Precision::kBfloat16 ? "BF16" : "FP32"; }

void Gemm(Precision p, bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc) {
  if (m == 0 || n == 0) return;
  if (p == Precision::kBfloat16 && k > 0) {
    BfloatGemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k,
              alpha, a, lda, b, ldb, beta, c, ldc);
}

const char* CpuMatmulIsa() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::sse41: return "sse41";
    default: return "other";
  }
}

absl::Status CheckPrecisionSupported(Precision p) {
  if (p != Precision::kBfloat16) return absl::OkStatus();
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  if (isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx) return absl::OkStatus();
  return absl::FailedPreconditionError(
      std::string("train.precision BF16 needs the CPU feature avx512_bf16 (AVX512_BF16 bfloat16 dot products); ") +
      "this process's matrix-product ISA is " + CpuMatmulIsa() +
      " (the CPU lacks it, or ONEDNN_MAX_CPU_ISA lowers it): use train.precision FP32 on this machine");
}

void SetBlasThreads(int threads) {
  openblas_set_num_threads(threads);
  g_threads.store(threads, std::memory_order_relaxed);
}

const char* BlasCoreName() { return openblas_get_corename(); }

double MeasureGemmGflops(Env* env, Precision p, int n, double min_seconds) {
  std::vector<float> a(static_cast<size_t>(n) * n, 0.5f), b(a.size(), 0.25f), c(a.size());
  Gemm(p, false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);  // warm up
  // The fastest product of those that fit in `min_seconds`: the peak, the
  // least disturbed by anything else running.
  const Stopwatch total(env);
  Stopwatch one(env);
  double best = 0;
  do {
    one.Lap();
    Gemm(p, false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    const double seconds = one.Lap();
    if (seconds > 0 && (best == 0 || seconds < best)) best = seconds;
  } while (total.ElapsedSeconds() < min_seconds);
  return best > 0 ? 2.0 * n * n * static_cast<double>(n) / best / 1e9 : 0;
}

std::string BfloatGemmImpl(bool trans_a, bool trans_b, int m, int n, int k) {
  return MakeMatmul(trans_a, trans_b, m, n, k, n)->pd.impl_info_str();
}

}  // namespace shardline
