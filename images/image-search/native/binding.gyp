{
  "targets": [
    {
      "target_name": "strata_faiss",
      "sources": ["faiss_binding.cc", "faiss_training.cc"],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
      "defines": ["NAPI_VERSION=8", "NAPI_CPP_EXCEPTIONS"],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions", "-fno-rtti"],
      "cflags_cc": ["-std=c++17", "-fexceptions", "-frtti", "-fopenmp", "-O2"],
      "libraries": ["-lfaiss", "-lopenblas", "-fopenmp", "-lgomp"],
      "ldflags": ["-fopenmp"]
    }
  ]
}
