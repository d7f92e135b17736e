// The convolution and pooling kernels of the CNN (cnn.h), over a batch laid
// out channel-major: [C, n, H, W] ("CNHW"), so that one GEMM covers the
// whole batch and its output is already the next layer's input layout.
//
// A kxk convolution (stride 1, same padding) of in [C, n, H, W] by weights
// [O, C, k, k] (PyTorch's layout) is
//   PadImages(in) -> padded [C, n, H+2p, W+2p] (p = k/2 zeros around each image)
//   Im2Col(padded) -> cols [C*k*k, n*H*W];  out [O, n*H*W] = W [O, C*k*k] * cols
// and its backward
//   dW = dout * cols^T;  dcols = W^T * dout;
//   Col2Im(dcols) -> dpadded;  UnpadImages(dpadded) -> din.
// Row (c, i, j) of cols, column (b, y, x) holds in[c][b][y+i-p][x+j-p]
// (zero outside the image). With the padding in place every row of cols is
// a plain copy of w floats: no bounds checks in the inner loops. The CNN
// runs Im2Col/Col2Im over chunks of the batch (ConvChunk) so cols stays in
// cache, accumulating dW chunk by chunk in a fixed order.
#ifndef SHARDLINE_WORKER_MODEL_CONV_H_
#define SHARDLINE_WORKER_MODEL_CONV_H_

#include <cstdint>

namespace shardline {

struct ConvGeometry {
  int in_channels = 0;
  int out_channels = 0;
  int kernel = 3;  // odd
  int height = 0;  // of input and output (same padding)
  int width = 0;

  int pad() const { return kernel / 2; }
  int64_t col_rows() const { return static_cast<int64_t>(in_channels) * kernel * kernel; }
  int64_t pixels() const { return static_cast<int64_t>(height) * width; }
  int padded_height() const { return height + 2 * pad(); }
  int padded_width() const { return width + 2 * pad(); }
  int64_t padded_pixels() const { return static_cast<int64_t>(padded_height()) * padded_width(); }
};

// in [C, batch, H, W] -> padded [C, batch, H+2p, W+2p], zero borders.
void PadImages(const ConvGeometry& g, int batch, const float* in, float* padded);

// The interiors of padded [C, batch, H+2p, W+2p] -> out [C, batch, H, W].
void UnpadImages(const ConvGeometry& g, int batch, const float* padded, float* out);

// Images [first, first + count) of padded [C, batch, H+2p, W+2p] -> cols
// [C*k*k, count*H*W].
void Im2Col(const ConvGeometry& g, int batch, int first, int count, const float* padded, float* cols);

// The adjoint of Im2Col: adds every element of cols [C*k*k, count*H*W]
// into the position it was copied from, in images [first, first + count)
// of dpadded [C, batch, H+2p, W+2p] (which the caller zeroes first; what
// lands in the border is dropped by UnpadImages). Fixed order: bitwise
// reproducible.
void Col2Im(const ConvGeometry& g, int batch, int first, int count, const float* cols, float* dpadded);

// Images per chunk for a layer of geometry g: as many as keep one chunk's
// cols, and its output, within about 1 MiB each (at least one, at most
// batch).
int ConvChunk(const ConvGeometry& g, int batch);

// Sums of each of `rows` rows of `len` floats, in a fixed order (eight
// interleaved partial sums, then combined): vectorisable and bitwise
// reproducible. out[r] = sum, or out[r] += sum with accumulate.
void RowSums(int rows, int64_t len, const float* in, bool accumulate, float* out);

}  // namespace shardline

#endif  // SHARDLINE_WORKER_MODEL_CONV_H_
