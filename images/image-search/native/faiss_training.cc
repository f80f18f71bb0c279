// FAISS training helpers of the binding (see faiss_training.h).
#include "faiss_training.h"

#include <faiss/Clustering.h>
#include <faiss/IVFlib.h>
#include <faiss/IndexFlat.h>
#include <faiss/IndexIVFPQ.h>
#include <faiss/IndexPQ.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

namespace strata_faiss {

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

}  // namespace strata_faiss
