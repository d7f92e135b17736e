// The scratch buffers of a model's workspace grow to the largest size any
// call asks for, exactly: Model::WorkspaceBytes predicts their capacity,
// which resize's doubling would leave to the order of the calls.
#ifndef SHARDLINE_WORKER_MODEL_GROW_H_
#define SHARDLINE_WORKER_MODEL_GROW_H_

#include <cstddef>
#include <vector>

namespace shardline {

// v holds at least n elements (its contents kept), its capacity the
// largest n asked for so far; returns its data.
template <typename T>
T* Grow(std::vector<T>* v, size_t n) {
  if (v->size() < n) {
    v->reserve(n);  // exactly: a buffer shared by layers grows to their largest, not to twice a smaller one
    v->resize(n);
  }
  return v->data();
}

}  // namespace shardline

#endif  // SHARDLINE_WORKER_MODEL_GROW_H_
