// Strata's thin N-API binding over FAISS 1.7.3 (Debian libfaiss-dev).
//
// One JS class, FaissIndex, wraps a faiss::Index behind a shared_ptr and a reader/writer lock:
// searches take the lock shared (FAISS search is const and thread-safe), train/add/remove take it
// exclusively. Heavy calls run on libuv worker threads (Napi::AsyncWorker) and return Promises; the
// worker holds the shared_ptr and a reference to every input typed array, so neither can disappear
// while it runs.
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

namespace {

struct Handle {
  std::unique_ptr<faiss::Index> index;
  mutable std::shared_mutex lock;
};
using HandlePtr = std::shared_ptr<Handle>;

// Plain PQ codes otherwise turn on polysemous training in FAISS (~25x slower training, no gain here).
void DisablePolysemousTraining(faiss::Index* index) {
  faiss::IndexIVF* ivf = faiss::ivflib::try_extract_index_ivf(index);
  if (auto* ivfpq = dynamic_cast<faiss::IndexIVFPQ*>(ivf)) ivfpq->do_polysemous_training = false;
  if (auto* pq = dynamic_cast<faiss::IndexPQ*>(index)) pq->do_polysemous_training = false;
}

void SetVerbose(faiss::Index* index, bool verbose) {
  index->verbose = verbose;
  if (faiss::IndexIVF* ivf = faiss::ivflib::try_extract_index_ivf(index)) {
    ivf->verbose = verbose;
    ivf->cp.verbose = verbose;
    if (auto* ivfpq = dynamic_cast<faiss::IndexIVFPQ*>(ivf)) ivfpq->pq.verbose = verbose;
  }
}


// Two-level k-means for a big IVF coarse quantizer (FAISS's contrib two_level_clustering, in C++):
// sqrt(nlist) clusters first, then each split into a share of nlist proportional to its size. It costs
// about 2*sqrt(nlist) instead of nlist distance computations per point and iteration (~30x less for
// IVF4096) for nearly the same list quality. The IVF's own train() then sees a filled quantizer,
// skips level-1 training and trains the residual codec (PQ).
bool TrainCoarseTwoLevel(faiss::IndexIVF* ivf, size_t n, const float* x, bool verbose, int niter) {
  auto* flat = dynamic_cast<faiss::IndexFlat*>(ivf->quantizer);
  if (flat == nullptr || ivf->metric_type != faiss::METRIC_L2 || ivf->nlist < 1024 || flat->ntotal != 0 || n < ivf->nlist) return false;
  const size_t d = ivf->d, nlist = ivf->nlist;
  const size_t k1 = static_cast<size_t>(std::sqrt(static_cast<double>(nlist)));
  faiss::ClusteringParameters cp;
  cp.verbose = verbose;
  if (niter > 0) cp.niter = niter;
  faiss::Clustering top(d, k1, cp);
  faiss::IndexFlatL2 topIndex(d);
  top.train(n, x, topIndex);
  std::vector<faiss::Index::idx_t> assign(n);
  std::vector<float> dist(n);
  topIndex.search(n, x, 1, dist.data(), assign.data());
  std::vector<std::vector<size_t>> members(k1);
  for (size_t i = 0; i < n; i++) members[assign[i]].push_back(i);
  // Shares proportional to cluster sizes, summing to nlist, never more than the cluster's points.
  std::vector<size_t> share(k1);
  size_t given = 0;
  for (size_t c = 0; c < k1; c++) {
    share[c] = std::min(members[c].size(), static_cast<size_t>(std::floor(static_cast<double>(nlist) * members[c].size() / n)));
    given += share[c];
  }
  while (given < nlist) {
    size_t best = k1;
    double bestRoom = 0;
    for (size_t c = 0; c < k1; c++) {
      double room = static_cast<double>(members[c].size()) / (share[c] + 1);
      if (share[c] < members[c].size() && room > bestRoom) bestRoom = room, best = c;
    }
    if (best == k1) return false;
    share[best]++;
    given++;
  }
  std::vector<float> centroids;
  centroids.reserve(nlist * d);
  std::vector<float> sub;
  for (size_t c = 0; c < k1; c++) {
    if (share[c] == 0) continue;
    sub.resize(members[c].size() * d);
    for (size_t j = 0; j < members[c].size(); j++) std::copy(x + members[c][j] * d, x + (members[c][j] + 1) * d, sub.begin() + j * d);
    if (verbose) printf("two-level clustering: cluster %zu/%zu, %zu points into %zu centroids\n", c + 1, k1, members[c].size(), share[c]);
    faiss::ClusteringParameters subParams;
    subParams.verbose = false;
    if (niter > 0) subParams.niter = niter;
    faiss::Clustering part(d, share[c], subParams);
    faiss::IndexFlatL2 partIndex(d);
    part.train(members[c].size(), sub.data(), partIndex);
    centroids.insert(centroids.end(), part.centroids.begin(), part.centroids.end());
  }
  flat->add(nlist, centroids.data());
  return true;
}

const float* FloatData(const Napi::Value& v, size_t* count) {
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_float32_array) {
    throw Napi::TypeError::New(v.Env(), "expected a Float32Array");
  }
  auto arr = v.As<Napi::Float32Array>();
  *count = arr.ElementLength();
  return arr.Data();
}

const int64_t* IdData(const Napi::Value& v, size_t* count) {
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_bigint64_array) {
    throw Napi::TypeError::New(v.Env(), "expected a BigInt64Array of ids");
  }
  auto arr = v.As<Napi::BigInt64Array>();
  *count = arr.ElementLength();
  return arr.Data();
}

size_t RowCount(Napi::Env env, size_t floats, int d) {
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

class FaissIndex : public Napi::ObjectWrap<FaissIndex> {
 public:
  static Napi::FunctionReference* constructor;

  static Napi::Object Init(Napi::Env env, Napi::Object exports) {
    Napi::Function cls = DefineClass(
        env, "FaissIndex",
        {
            StaticMethod<&FaissIndex::Read>("read"),
            InstanceAccessor<&FaissIndex::Dimension>("d"),
            InstanceAccessor<&FaissIndex::NTotal>("ntotal"),
            InstanceAccessor<&FaissIndex::IsTrained>("isTrained"),
            InstanceAccessor<&FaissIndex::Description>("description"),
            InstanceMethod<&FaissIndex::Train>("train"),
            InstanceMethod<&FaissIndex::AddWithIds>("addWithIds"),
            InstanceMethod<&FaissIndex::Search>("search"),
            InstanceMethod<&FaissIndex::RemoveIds>("removeIds"),
            InstanceMethod<&FaissIndex::Write>("write"),
            InstanceMethod<&FaissIndex::Clone>("clone"),
            InstanceMethod<&FaissIndex::Reconstruct>("reconstruct"),
            InstanceMethod<&FaissIndex::MemoryUsage>("memoryUsage"),
        });
    constructor = new Napi::FunctionReference(Napi::Persistent(cls));
    exports.Set("FaissIndex", cls);
    return exports;
  }

  // new FaissIndex(d, description, metric) — or, internally, new FaissIndex(External<Handle>).
  explicit FaissIndex(const Napi::CallbackInfo& info) : Napi::ObjectWrap<FaissIndex>(info) {
    Napi::Env env = info.Env();
    if (info.Length() == 1 && info[0].IsExternal()) {
      handle_ = *info[0].As<Napi::External<HandlePtr>>().Data();
      return;
    }
    if (info.Length() < 2 || !info[0].IsNumber() || !info[1].IsString()) {
      throw Napi::TypeError::New(env, "usage: new FaissIndex(dimension, description, metric?: 'l2' | 'ip')");
    }
    int d = info[0].As<Napi::Number>().Int32Value();
    std::string description = info[1].As<Napi::String>();
    std::string metric = info.Length() > 2 && info[2].IsString() ? info[2].As<Napi::String>().Utf8Value() : "l2";
    if (d <= 0) throw Napi::RangeError::New(env, "dimension must be positive");
    if (metric != "l2" && metric != "ip") throw Napi::RangeError::New(env, "metric must be 'l2' or 'ip'");
    handle_ = std::make_shared<Handle>();
    try {
      handle_->index.reset(faiss::index_factory(d, description.c_str(),
                                                metric == "ip" ? faiss::METRIC_INNER_PRODUCT : faiss::METRIC_L2));
    } catch (const std::exception& e) {
      throw Napi::Error::New(env, std::string("invalid index description '") + description + "': " + e.what());
    }
    DisablePolysemousTraining(handle_->index.get());
    description_ = description;
  }

  HandlePtr handle() const { return handle_; }

 private:
  Napi::Value Dimension(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), handle_->index->d); }
  Napi::Value NTotal(const Napi::CallbackInfo& info) {
    std::shared_lock<std::shared_mutex> guard(handle_->lock, std::try_to_lock);
    return Napi::Number::New(info.Env(), static_cast<double>(handle_->index->ntotal));
  }
  Napi::Value IsTrained(const Napi::CallbackInfo& info) { return Napi::Boolean::New(info.Env(), handle_->index->is_trained); }
  Napi::Value Description(const Napi::CallbackInfo& info) { return Napi::String::New(info.Env(), description_); }

  // train(vectors: Float32Array, verbose?: boolean, options?: boolean | TrainOptions): Promise<void>;
  // verbose prints FAISS's k-means progress; a boolean third argument is `twoLevel`.
  Napi::Value Train(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    size_t floats;
    const float* x = FloatData(info[0], &floats);
    size_t n = RowCount(env, floats, handle_->index->d);
    TrainOptions o;
    o.verbose = info.Length() > 1 && info[1].ToBoolean();
    // Two-level coarse training only when asked (L2 IVF indexes with nlist >= 1024): measured here it
    // saved ~45% of training time but cost recall before re-ranking, so it is not the default.
    if (info.Length() > 2 && info[2].IsBoolean()) o.twoLevel = info[2].As<Napi::Boolean>().Value();
    if (info.Length() > 2 && info[2].IsObject()) {
      Napi::Object opts = info[2].As<Napi::Object>();
      auto flag = [&](const char* name, bool* out) {
        if (opts.Has(name) && !opts.Get(name).IsUndefined()) *out = opts.Get(name).ToBoolean();
      };
      auto count = [&](const char* name, int* out) {
        if (!opts.Has(name) || opts.Get(name).IsUndefined()) return;
        Napi::Value v = opts.Get(name);
        if (!v.IsNumber() || v.As<Napi::Number>().DoubleValue() < 0 || v.As<Napi::Number>().DoubleValue() > 1e6) {
          throw Napi::RangeError::New(env, std::string("train option ") + name + " must be a number in 0..1000000");
        }
        *out = v.As<Napi::Number>().Int32Value();
      };
      flag("twoLevel", &o.twoLevel);
      flag("spherical", &o.spherical);
      count("niter", &o.niter);
      count("pqNiter", &o.pqNiter);
      count("pqMaxPointsPerCentroid", &o.pqMaxPoints);
      count("threads", &o.threads);
      count("blasThreads", &o.blasThreads);
    }
    auto* w = new TrainWorker(env, handle_, x, n, o);
    w->Keep(info[0]);
    w->Keep(Value());
    Napi::Promise p = w->Promise();
    w->Queue();
    return p;
  }

  // addWithIds(vectors: Float32Array, ids: BigInt64Array): Promise<void>
  Napi::Value AddWithIds(const Napi::CallbackInfo& info) {
    size_t floats, nids;
    const float* x = FloatData(info[0], &floats);
    const int64_t* ids = IdData(info[1], &nids);
    size_t n = RowCount(info.Env(), floats, handle_->index->d);
    if (n != nids) throw Napi::RangeError::New(info.Env(), "got " + std::to_string(n) + " vectors but " + std::to_string(nids) + " ids");
    if (!handle_->index->is_trained) throw Napi::Error::New(info.Env(), "index is not trained");
    auto* w = new AddWorker(info.Env(), handle_, x, ids, n);
    w->Keep(info[0]);
    w->Keep(info[1]);
    w->Keep(Value());
    Napi::Promise p = w->Promise();
    w->Queue();
    return p;
  }

  // search(queries: Float32Array, k: number, nprobe?: number): Promise<{distances, labels}>
  Napi::Value Search(const Napi::CallbackInfo& info) {
    size_t floats;
    const float* x = FloatData(info[0], &floats);
    size_t n = RowCount(info.Env(), floats, handle_->index->d);
    if (info.Length() < 2 || !info[1].IsNumber()) throw Napi::TypeError::New(info.Env(), "k must be a number");
    int k = info[1].As<Napi::Number>().Int32Value();
    if (k <= 0) throw Napi::RangeError::New(info.Env(), "k must be positive");
    int nprobe = info.Length() > 2 && info[2].IsNumber() ? info[2].As<Napi::Number>().Int32Value() : 0;
    if (!handle_->index->is_trained) throw Napi::Error::New(info.Env(), "index is not trained");
    auto* w = new SearchWorker(info.Env(), handle_, x, n, k, nprobe);
    w->Keep(info[0]);
    w->Keep(Value());
    Napi::Promise p = w->Promise();
    w->Queue();
    return p;
  }

  // removeIds(ids: BigInt64Array): Promise<number removed>
  Napi::Value RemoveIds(const Napi::CallbackInfo& info) {
    size_t n;
    const int64_t* ids = IdData(info[0], &n);
    auto* w = new RemoveWorker(info.Env(), handle_, ids, n);
    w->Keep(info[0]);
    w->Keep(Value());
    Napi::Promise p = w->Promise();
    w->Queue();
    return p;
  }

  // write(path): Promise<void>
  Napi::Value Write(const Napi::CallbackInfo& info) {
    if (!info[0].IsString()) throw Napi::TypeError::New(info.Env(), "path must be a string");
    auto* w = new WriteWorker(info.Env(), handle_, info[0].As<Napi::String>());
    w->Keep(Value());
    Napi::Promise p = w->Promise();
    w->Queue();
    return p;
  }

  // FaissIndex.read(path): Promise<FaissIndex>
  static Napi::Value Read(const Napi::CallbackInfo& info) {
    if (!info[0].IsString()) throw Napi::TypeError::New(info.Env(), "path must be a string");
    auto* w = new NewHandleWorker(info.Env(), nullptr, info[0].As<Napi::String>(), constructor);
    Napi::Promise p = w->Promise();
    w->Queue();
    return p;
  }

  // clone(): Promise<FaissIndex> — a deep copy, for building a new index on the side.
  Napi::Value Clone(const Napi::CallbackInfo& info) {
    auto* w = new NewHandleWorker(info.Env(), handle_, "", constructor);
    w->Keep(Value());
    Napi::Promise p = w->Promise();
    w->Queue();
    return p;
  }

  // reconstruct(id): Float32Array — the stored (possibly quantised) vector of an id.
  Napi::Value Reconstruct(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    int64_t id = info[0].IsBigInt() ? info[0].As<Napi::BigInt>().Int64Value(nullptr) : info[0].As<Napi::Number>().Int64Value();
    std::shared_lock<std::shared_mutex> guard(handle_->lock);
    auto out = Napi::Float32Array::New(env, handle_->index->d);
    try {
      faiss::Index* index = handle_->index.get();
      if (faiss::IndexIVF* ivf = faiss::ivflib::try_extract_index_ivf(index)) {
        if (ivf == index && !ivf->direct_map.no()) {
          ivf->reconstruct(id, out.Data());
          return out;
        }
        if (ivf == index) {
          // Without a direct map, look the id up by scanning the inverted lists.
          for (size_t list = 0; list < ivf->nlist; list++) {
            size_t size = ivf->invlists->list_size(list);
            const faiss::Index::idx_t* ids = ivf->invlists->get_ids(list);
            for (size_t off = 0; off < size; off++) {
              if (ids[off] == id) {
                ivf->reconstruct_from_offset(list, off, out.Data());
                ivf->invlists->release_ids(list, ids);
                return out;
              }
            }
            ivf->invlists->release_ids(list, ids);
          }
          throw std::runtime_error("id " + std::to_string(id) + " not found");
        }
      }
      index->reconstruct(id, out.Data());
    } catch (const std::exception& e) {
      throw Napi::Error::New(env, std::string("reconstruct failed: ") + e.what());
    }
    return out;
  }

  // memoryUsage(): bytes FAISS holds for this index, by part (IVF: lists with their spare capacity,
  // coarse centroids, codebooks, precomputed tables; others: serialized size).
  Napi::Value MemoryUsage(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    std::shared_lock<std::shared_mutex> guard(handle_->lock);
    auto out = Napi::Object::New(env);
    faiss::Index* index = handle_->index.get();
    faiss::IndexIVF* ivf = faiss::ivflib::try_extract_index_ivf(index);
    auto* lists = ivf ? dynamic_cast<faiss::ArrayInvertedLists*>(ivf->invlists) : nullptr;
    if (lists != nullptr) {
      double listBytes = 0;
      for (size_t i = 0; i < lists->nlist; i++) listBytes += lists->codes[i].capacity() + lists->ids[i].capacity() * sizeof(faiss::Index::idx_t);
      auto* flat = dynamic_cast<faiss::IndexFlat*>(ivf->quantizer);
      double coarse = flat ? static_cast<double>(flat->codes.size()) : 0;
      double codebooks = 0, tables = 0;
      if (auto* pq = dynamic_cast<faiss::IndexIVFPQ*>(ivf)) {
        codebooks = pq->pq.centroids.size() * sizeof(float);
        tables = pq->precomputed_table.size() * sizeof(float);
      }
      out.Set("lists", listBytes);
      out.Set("coarse", coarse);
      out.Set("codebooks", codebooks);
      out.Set("tables", tables);
      out.Set("total", listBytes + coarse + codebooks + tables);
      return out;
    }
    faiss::VectorIOWriter writer;
    faiss::write_index(index, &writer);
    out.Set("total", static_cast<double>(writer.data.size()));
    return out;
  }

  HandlePtr handle_;
  std::string description_;
};

Napi::FunctionReference* FaissIndex::constructor = nullptr;

Napi::Value NewHandleWorker::Result() {
  Napi::Env env = Env();
  auto* boxed = new HandlePtr(result_);
  auto external = Napi::External<HandlePtr>::New(env, boxed, [](Napi::Env, HandlePtr* p) { delete p; });
  return ctor_->New({external});
}

Napi::Object Init(Napi::Env env, Napi::Object exports) { return FaissIndex::Init(env, exports); }

}  // namespace

NODE_API_MODULE(strata_faiss, Init)
