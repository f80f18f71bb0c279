// Strata's thin N-API binding over FAISS 1.7.3 (Debian libfaiss-dev).
//
// One JS class, FaissIndex, wraps a faiss::Index behind a shared_ptr and a reader/writer lock:
// searches take the lock shared (FAISS search is const and thread-safe), train/add/remove take it
// exclusively. Heavy calls run on libuv worker threads (Napi::AsyncWorker) and return Promises; the
// worker holds the shared_ptr and a reference to every input typed array, so neither can disappear
// while it runs.
#include "faiss_workers.h"

namespace strata_faiss {

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

}  // namespace strata_faiss

static Napi::Object Init(Napi::Env env, Napi::Object exports) { return strata_faiss::FaissIndex::Init(env, exports); }

NODE_API_MODULE(strata_faiss, Init)
