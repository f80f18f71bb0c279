// The binding's asynchronous jobs (Napi::AsyncWorker on libuv's threads, each resolving a Promise) and the
// shared index handle they work on. Included by faiss_binding.cc only.
#pragma once

#include <napi.h>

#include <faiss/Clustering.h>
#include <faiss/IVFlib.h>
#include <faiss/IndexFlat.h>
#include <faiss/Index.h>
#include <faiss/IndexIVF.h>
#include <faiss/IndexIVFPQ.h>
#include <faiss/IndexPQ.h>
#include <faiss/impl/AuxIndexStructures.h>
#include <faiss/impl/IDSelector.h>
#include <faiss/impl/io.h>
#include <faiss/invlists/InvertedLists.h>
#include <faiss/clone_index.h>
#include <faiss/index_factory.h>
#include <faiss/index_io.h>

#include <omp.h>

// OpenBLAS (Debian's pthread build) keeps its own thread pool for sgemm, apart from OpenMP's.
extern "C" {
int openblas_get_num_threads(void);
void openblas_set_num_threads(int num_threads);
}

#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "faiss_training.h"

namespace strata_faiss {

struct Handle {
  std::unique_ptr<faiss::Index> index;
  mutable std::shared_mutex lock;
};
using HandlePtr = std::shared_ptr<Handle>;

inline const float* FloatData(const Napi::Value& v, size_t* count) {
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_float32_array) {
    throw Napi::TypeError::New(v.Env(), "expected a Float32Array");
  }
  auto arr = v.As<Napi::Float32Array>();
  *count = arr.ElementLength();
  return arr.Data();
}

inline const int64_t* IdData(const Napi::Value& v, size_t* count) {
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_bigint64_array) {
    throw Napi::TypeError::New(v.Env(), "expected a BigInt64Array of ids");
  }
  auto arr = v.As<Napi::BigInt64Array>();
  *count = arr.ElementLength();
  return arr.Data();
}

inline size_t RowCount(Napi::Env env, size_t floats, int d) {
  if (d <= 0 || floats % static_cast<size_t>(d) != 0) {
    throw Napi::RangeError::New(env, "vector data length is not a multiple of the index dimension " + std::to_string(d));
  }
  return floats / static_cast<size_t>(d);
}

// Base for workers: resolves/rejects a Promise and keeps its inputs alive.
class PromiseWorker : public Napi::AsyncWorker {
 public:
  PromiseWorker(Napi::Env env, HandlePtr handle)
      : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)), handle_(std::move(handle)) {}
  Napi::Promise Promise() { return deferred_.Promise(); }
  void Keep(const Napi::Value& v) { kept_.push_back(Napi::Persistent(v.As<Napi::Object>())); }

 protected:
  void Execute() override {
    // libuv reuses worker threads, and OpenMP's thread count is per thread: set it for every job.
    omp_set_num_threads(Threads());
    try {
      Run();
    } catch (const std::exception& e) {
      SetError(e.what());
    }
  }
  virtual void Run() = 0;
  virtual int Threads() const { return omp_get_num_procs(); }
  virtual Napi::Value Result() { return Env().Undefined(); }
  void OnOK() override { deferred_.Resolve(Result()); }
  void OnError(const Napi::Error& e) override { deferred_.Reject(e.Value()); }

  Napi::Promise::Deferred deferred_;
  HandlePtr handle_;
  std::vector<Napi::ObjectReference> kept_;
};

// Knobs of one train() call; 0 / false = FAISS's default.
struct TrainOptions {
  bool verbose = false;
  bool twoLevel = false;
  int niter = 0;         // coarse (IVF) k-means iterations (FAISS: 25)
  int pqNiter = 0;       // PQ codebook k-means iterations (FAISS: 25)
  int pqMaxPoints = 0;   // PQ training points per code (FAISS: 256, i.e. 256*256 = 65 536 residuals)
  bool spherical = false;  // normalise coarse centroids after each iteration (unit-vector data)
  int threads = 0;       // OpenMP threads (default: all processors)
  int blasThreads = 0;   // OpenBLAS threads during training (default: leave OpenBLAS's setting)
};

class TrainWorker : public PromiseWorker {
 public:
  TrainWorker(Napi::Env env, HandlePtr h, const float* x, size_t n, TrainOptions o)
      : PromiseWorker(env, std::move(h)), x_(x), n_(n), o_(o) {}
  void Run() override {
    std::unique_lock<std::shared_mutex> guard(handle_->lock);
    faiss::Index* index = handle_->index.get();
    SetVerbose(index, o_.verbose);
    faiss::IndexIVF* ivf = faiss::ivflib::try_extract_index_ivf(index);
    if (ivf != nullptr) {
      if (o_.niter > 0) ivf->cp.niter = o_.niter;
      ivf->cp.spherical = o_.spherical;
      if (auto* ivfpq = dynamic_cast<faiss::IndexIVFPQ*>(ivf)) {
        if (o_.pqNiter > 0) ivfpq->pq.cp.niter = o_.pqNiter;
        if (o_.pqMaxPoints > 0) ivfpq->pq.cp.max_points_per_centroid = o_.pqMaxPoints;
      }
    }
    int savedBlas = openblas_get_num_threads();
    if (o_.blasThreads > 0) openblas_set_num_threads(o_.blasThreads);
    try {
      if (o_.twoLevel && ivf != nullptr && !ivf->is_trained) TrainCoarseTwoLevel(ivf, n_, x_, o_.verbose, o_.niter);
      index->train(static_cast<faiss::Index::idx_t>(n_), x_);
    } catch (...) {
      if (o_.blasThreads > 0) openblas_set_num_threads(savedBlas);
      SetVerbose(index, false);
      throw;
    }
    if (o_.blasThreads > 0) openblas_set_num_threads(savedBlas);
    SetVerbose(index, false);
  }
  int Threads() const override { return o_.threads > 0 ? o_.threads : omp_get_num_procs(); }

 private:
  const float* x_;
  size_t n_;
  TrainOptions o_;
};

class AddWorker : public PromiseWorker {
 public:
  AddWorker(Napi::Env env, HandlePtr h, const float* x, const int64_t* ids, size_t n)
      : PromiseWorker(env, std::move(h)), x_(x), ids_(ids), n_(n) {}
  void Run() override {
    std::unique_lock<std::shared_mutex> guard(handle_->lock);
    handle_->index->add_with_ids(static_cast<faiss::Index::idx_t>(n_), x_, ids_);
  }

 private:
  const float* x_;
  const int64_t* ids_;
  size_t n_;
};

class SearchWorker : public PromiseWorker {
 public:
  SearchWorker(Napi::Env env, HandlePtr h, const float* x, size_t n, int k, int nprobe)
      : PromiseWorker(env, std::move(h)), x_(x), n_(n), k_(k), nprobe_(nprobe), distances_(n * k), labels_(n * k) {}
  void Run() override {
    // The wrapper structure of an index never changes after construction: safe to inspect unlocked.
    faiss::Index* index = handle_->index.get();
    faiss::IndexIVF* ivf = faiss::ivflib::try_extract_index_ivf(index);
    if (ivf != nullptr && nprobe_ > 0 && ivf != index) {
      // Wrappers (OPQ pre-transform, IDMap, refine) do not forward search parameters in FAISS 1.7.3:
      // set nprobe on the inner IVF for this one search, holding the lock exclusively.
      std::unique_lock<std::shared_mutex> guard(handle_->lock);
      size_t saved = ivf->nprobe;
      ivf->nprobe = static_cast<size_t>(nprobe_);
      try {
        index->search(n_, x_, k_, distances_.data(), labels_.data());
      } catch (...) {
        ivf->nprobe = saved;
        throw;
      }
      ivf->nprobe = saved;
      return;
    }
    std::shared_lock<std::shared_mutex> guard(handle_->lock);
    if (ivf != nullptr && nprobe_ > 0) {
      // A bare IVF: per-search nprobe without touching the shared index.
      faiss::SearchParametersIVF params;
      params.nprobe = static_cast<size_t>(nprobe_);
      index->search(n_, x_, k_, distances_.data(), labels_.data(), &params);
      return;
    }
    index->search(n_, x_, k_, distances_.data(), labels_.data());
  }
  // A few queries gain nothing from an OpenMP team (waking threads costs more than it saves, badly so
  // on a busy machine); concurrent requests already run on separate libuv threads.
  int Threads() const override { return n_ < 16 ? 1 : omp_get_num_procs(); }
  Napi::Value Result() override {
    Napi::Env env = Env();
    auto d = Napi::Float32Array::New(env, distances_.size());
    std::copy(distances_.begin(), distances_.end(), d.Data());
    auto l = Napi::BigInt64Array::New(env, labels_.size());
    std::copy(labels_.begin(), labels_.end(), l.Data());
    auto out = Napi::Object::New(env);
    out.Set("distances", d);
    out.Set("labels", l);
    return out;
  }

 private:
  const float* x_;
  size_t n_;
  int k_;
  int nprobe_;
  std::vector<float> distances_;
  std::vector<faiss::Index::idx_t> labels_;
};

class RemoveWorker : public PromiseWorker {
 public:
  RemoveWorker(Napi::Env env, HandlePtr h, const int64_t* ids, size_t n)
      : PromiseWorker(env, std::move(h)), ids_(ids), n_(n) {}
  void Run() override {
    std::unique_lock<std::shared_mutex> guard(handle_->lock);
    faiss::IDSelectorBatch sel(n_, ids_);
    removed_ = handle_->index->remove_ids(sel);
  }
  Napi::Value Result() override { return Napi::Number::New(Env(), static_cast<double>(removed_)); }

 private:
  const int64_t* ids_;
  size_t n_;
  size_t removed_ = 0;
};

class WriteWorker : public PromiseWorker {
 public:
  WriteWorker(Napi::Env env, HandlePtr h, std::string path) : PromiseWorker(env, std::move(h)), path_(std::move(path)) {}
  void Run() override {
    std::shared_lock<std::shared_mutex> guard(handle_->lock);
    faiss::write_index(handle_->index.get(), path_.c_str());
  }

 private:
  std::string path_;
};

// Produces a new Handle (read from file or cloned); the JS side wraps it in a new FaissIndex.
class NewHandleWorker : public PromiseWorker {
 public:
  NewHandleWorker(Napi::Env env, HandlePtr source, std::string path, Napi::FunctionReference* ctor)
      : PromiseWorker(env, std::move(source)), path_(std::move(path)), ctor_(ctor) {}
  void Run() override {
    result_ = std::make_shared<Handle>();
    if (handle_) {
      std::shared_lock<std::shared_mutex> guard(handle_->lock);
      result_->index.reset(faiss::clone_index(handle_->index.get()));
    } else {
      result_->index.reset(faiss::read_index(path_.c_str()));
    }
  }
  Napi::Value Result() override;

 private:
  std::string path_;
  Napi::FunctionReference* ctor_;
  HandlePtr result_;
};

}  // namespace strata_faiss
