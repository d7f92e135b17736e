#include "worker/model/gemm.h"

#include <cblas.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

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

// One shape's matmul: A and B (bfloat16; float32 only for DnnlFloatGemm)
// with the given row strides (read transposed where asked) into float32 C
// with stride ldc, alpha applied to the float32 product and beta * C added
// to it inside oneDNN's kernel (an output scale and a sum post-op: no extra
// pass over C), made once and reused.
struct Matmul {
  memory::desc a, b, c;
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
};

// operands, trans_a, trans_b, m, n, k, lda, ldb, ldc, alpha, beta
using ShapeKey = std::tuple<memory::data_type, bool, bool, int, int, int, int, int, int, float, float>;

std::unique_ptr<Matmul> MakeMatmul(memory::data_type operands, bool trans_a, bool trans_b, int m, int n, int k,
                                   int lda, int ldb, int ldc, float alpha, float beta) {
  auto mm = std::make_unique<Matmul>();
  // A: m x k (row stride lda), or stored k x m and read transposed.
  mm->a = trans_a ? memory::desc({m, k}, operands, memory::dims{1, lda})
                  : memory::desc({m, k}, operands, memory::dims{lda, 1});
  mm->b = trans_b ? memory::desc({k, n}, operands, memory::dims{1, ldb})
                  : memory::desc({k, n}, operands, memory::dims{ldb, 1});
  mm->c = memory::desc({m, n}, memory::data_type::f32, memory::dims{ldc, 1});
  dnnl::primitive_attr attr;
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  if (beta != 0.0f) {
    dnnl::post_ops sum;
    sum.append_sum(beta);
    attr.set_post_ops(sum);
  }
  mm->pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(mm->a, mm->b, mm->c), attr, Engine());
  mm->prim = dnnl::matmul(mm->pd);
  return mm;
}

// This thread's matmuls by shape and its stream: oneDNN's primitives and
// streams are made once and reused, a stream by one thread at a time.
// Neither changes what a product computes (its bits follow the shape and
// the thread count only).
struct ThreadState {
  std::map<ShapeKey, std::unique_ptr<Matmul>> matmuls;
  std::unique_ptr<dnnl::stream> stream;
};

ThreadState& State() {
  thread_local ThreadState state;
  if (state.stream == nullptr) state.stream = std::make_unique<dnnl::stream>(Engine());
  return state;
}

// C = alpha op(A) op(B) + beta C in oneDNN, A and B of type `operands`, on
// this thread's matmul for the shape.
void RunMatmul(memory::data_type operands, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
               const void* a, int lda, const void* b, int ldb, float beta, float* c, int ldc) {
  FollowThreadCount();
  ThreadState& st = State();
  // A model uses a few dozen shapes (attention's causal blocks, a smaller
  // last batch, a new world's rows); far more means shapes that come and
  // go, whose primitives are dropped rather than kept without bound.
  constexpr size_t kMaxCachedMatmuls = 1024;
  if (st.matmuls.size() >= kMaxCachedMatmuls) st.matmuls.clear();
  std::unique_ptr<Matmul>& mm =
      st.matmuls[ShapeKey(operands, trans_a, trans_b, m, n, k, lda, ldb, ldc, alpha, beta)];
  if (mm == nullptr) mm = MakeMatmul(operands, trans_a, trans_b, m, n, k, lda, ldb, ldc, alpha, beta);
  memory a_mem(mm->a, Engine(), const_cast<void*>(a));
  memory b_mem(mm->b, Engine(), const_cast<void*>(b));
  memory c_mem(mm->c, Engine(), c);
  mm->prim.execute(*st.stream, {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, c_mem}});
  st.stream->wait();
}

void RunBf16(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const uint16_t* a, int lda,
             const uint16_t* b, int ldb, float beta, float* c, int ldc) {
  RunMatmul(memory::data_type::bf16, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace

void GemmBf16(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const Bf16* a, int lda, const Bf16* b,
              int ldb, float beta, float* c, int ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    // No products: C = beta * C, as sgemm does.
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < n; ++j) c[static_cast<int64_t>(i) * ldc + j] *= beta;
    }
    return;
  }
  RunBf16(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

const char* PrecisionName(Precision p) { return p == Precision::kBfloat16 ? "BF16" : "FP32"; }

void Sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
           int ldb, float beta, float* c, int ldc) {
  if (m == 0 || n == 0) return;
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

namespace {

bool CpuHasBf16Dot() {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  return isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
}

// SHARDLINE_BF16_KERNEL: "" (the CPU decides), "widened" or "onednn".
const char* KernelVariable() {
  const char* v = std::getenv("SHARDLINE_BF16_KERNEL");
  return v == nullptr ? "" : v;
}

}  // namespace

Bf16Kernel ProcessBf16Kernel() {
  static const Bf16Kernel kernel = [] {
    const std::string v = KernelVariable();
    if (v == "widened") return Bf16Kernel::kWidened;
    if (v == "onednn") return Bf16Kernel::kOneDnn;  // CheckPrecisionSupported refuses it where it cannot run
    return CpuHasBf16Dot() ? Bf16Kernel::kOneDnn : Bf16Kernel::kWidened;
  }();
  return kernel;
}

std::string Bf16KernelName(Bf16Kernel kernel) {
  if (kernel == Bf16Kernel::kOneDnn) return std::string("oneDNN ") + CpuMatmulIsa();
  return std::string("widened to float32, OpenBLAS ") + BlasCoreName() + " sgemm";
}

absl::Status CheckPrecisionSupported(Precision p) {
  if (p != Precision::kBfloat16) return absl::OkStatus();
  const std::string v = KernelVariable();
  if (!v.empty() && v != "widened" && v != "onednn") {
    return absl::InvalidArgumentError("SHARDLINE_BF16_KERNEL is '" + v.substr(0, 64) +
                                      "': give widened, onednn, or leave it unset for the CPU to decide");
  }
  if (ProcessBf16Kernel() == Bf16Kernel::kWidened || CpuHasBf16Dot()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      std::string("SHARDLINE_BF16_KERNEL=onednn needs the CPU feature avx512_bf16 (AVX512_BF16 bfloat16 dot "
                  "products); this process's matrix-product ISA is ") +
      CpuMatmulIsa() +
      " (the CPU lacks it, or ONEDNN_MAX_CPU_ISA lowers it): unset SHARDLINE_BF16_KERNEL to multiply bfloat16 "
      "operands widened to float32 here");
}

void SetBlasThreads(int threads) {
  openblas_set_num_threads(threads);
  g_threads.store(threads, std::memory_order_relaxed);
}

const char* BlasCoreName() { return openblas_get_corename(); }

void DnnlFloatGemm(int m, int n, int k, const float* a, const float* b, float* c) {
  RunMatmul(memory::data_type::f32, false, false, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
}

std::string BfloatGemmImpl(bool trans_a, bool trans_b, int m, int n, int k) {
  return MakeMatmul(memory::data_type::bf16, trans_a, trans_b, m, n, k, trans_a ? m : k, trans_b ? k : n, n, 1.0f, 0.0f)
      ->pd.impl_info_str();
}

}  // namespace shardline
