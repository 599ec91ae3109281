{
  "targets": [{
    "target_name": "tensorproc",
    "sources": [
      "native/addon.cc",
      "native/errors.cc",
      "native/segment.cc",
      "native/mapping.cc",
      "native/futex.cc",
      "native/channel.cc",
      "native/process.cc",
      "native/peer.cc",
      "native/transport.cc",
      "native/fill.cc",
      "native/file-map.cc",
      "native/cuda.cc"
    ],
    "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
    "defines": ["NAPI_VERSION=8", "NAPI_DISABLE_CPP_EXCEPTIONS", "NODE_API_SWALLOW_UNTHROWABLE_EXCEPTIONS", "_GNU_SOURCE"],
    "cflags_cc": ["-std=c++20", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"],
    "libraries": ["-ldl"],
    "cflags_cc!": ["-fno-exceptions", "-std=gnu++17"]
  }]
}
