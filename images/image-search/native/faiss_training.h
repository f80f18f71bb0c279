// FAISS training helpers of the binding (no Node.js API): polysemous training off, verbosity, and a
// two-level k-means for large IVF coarse quantizers.
#pragma once

#include <faiss/Index.h>
#include <faiss/IndexIVF.h>

#include <cstddef>

namespace strata_faiss {

// Plain PQ codes otherwise turn on polysemous training in FAISS (~25x slower training, no gain here).
void DisablePolysemousTraining(faiss::Index* index);

void SetVerbose(faiss::Index* index, bool verbose);

// Two-level k-means for a big IVF coarse quantizer (FAISS's contrib two_level_clustering, in C++):
// fills the quantizer and answers true, or answers false where it does not apply (the IVF's own
// train() then trains the quantizer as usual).
bool TrainCoarseTwoLevel(faiss::IndexIVF* ivf, size_t n, const float* x, bool verbose, int niter);

}  // namespace strata_faiss
