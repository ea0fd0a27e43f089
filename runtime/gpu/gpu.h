/*
 * gpu.h - the NVIDIA GPUs of the host: what it has, and whether a GPU
 * snapshot may be restored on it. A GPU sandbox's CUDA processes around a
 * checkpoint are runtime/gpu/cuda.h's (the sequence and its rules: docs/gpu.md).
 *
 * gpu_host_probe() reads the device nodes nvproxy opens (/dev/nvidiactl,
 * /dev/nvidia-uvm, /dev/nvidiaN), the driver version
 * (/proc/driver/nvidia/version) and the GPU models
 * (/proc/driver/nvidia/gpus/<bus id>/information, "Model:"). Nothing is
 * cached: a driver can be loaded or upgraded while snapfs runs. The host
 * profile (runtime/host.h) records driver and models for every snapshot; a
 * GPU snapshot is restorable only where the driver version, the GPU count
 * and the models are the same (gpu_compare_host()). A GPU sandbox's bundle
 * lists the nodes (gpu_host_nodes(), runtime/runsc/bundle.h).
 *
 * Threads: every function may be called from any thread; a struct gpu_host
 * is the caller's.
 */
#ifndef SNAPFS_GPU_H
#define SNAPFS_GPU_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "lib/strbuf.h"
#include "lib/util.h"

#define GPU_MAX 16
#define GPU_MODEL_MAX 96
#define GPU_DRIVER_MAX 64
#define GPU_NODES_MAX (4 + GPU_MAX)
#define GPU_NODE_MAX 48

struct gpu_host {
	char driver[GPU_DRIVER_MAX];	     /* "550.54.15"; "" without a loaded driver */
	size_t ngpus;			     /* GPUs the driver lists */
	char models[GPU_MAX][GPU_MODEL_MAX]; /* their models, sorted */
	size_t nnodes;
	char nodes[GPU_NODES_MAX][GPU_NODE_MAX]; /* device nodes present: "/dev/nvidiactl", ... */
	char missing[GPU_NODE_MAX + 64]; /* what a GPU sandbox needs and is absent; "" if nothing */
};

/*
 * Probe the host below @root ("" for the real one; tests pass a fake
 * tree). Only existence is checked here; the bundle checks the node types.
 */
int gpu_host_probe(const char *root, struct gpu_host *out);

/* "NVRM version: NVIDIA UNIX ... Kernel Module  550.54.15  ..." -> "550.54.15"; -EINVAL. */
int gpu_parse_driver_version(const char *text, char *out, size_t len);
/* The "Model:" line of an information file -> "NVIDIA H100 80GB HBM3"; -EINVAL. */
int gpu_parse_model(const char *text, char *out, size_t len);

/* Add "gpu_driver" (string) and "gpus" (array of models) to the profile @obj. */
int gpu_profile_add(cJSON *obj, const struct gpu_host *h);
/*
 * Compare the GPU part of a recorded host profile with @h: one line in @out
 * per difference (driver version, GPU count, GPU models); returns how many, or
 * @out's failure (lib/strbuf.h).
 */
int gpu_profile_compare(const char *recorded_json, const struct gpu_host *h, struct strbuf *out);
/* The same against this host. */
int gpu_compare_host(const char *recorded_json, struct strbuf *out);

/*
 * Can this host run a GPU sandbox? Probes into @h; -ENODEV with "cannot
 * <what>: gpu=1 needs an NVIDIA GPU and driver: /dev/nvidiactl is missing"
 * (or what else is missing first) in @e.
 */
int gpu_host_ready(const char *what, struct gpu_host *h, struct err *e);

/* @h's device nodes as the paths a bundle lists (struct bundle_spec); returns how many. */
size_t gpu_host_nodes(const struct gpu_host *h, const char *out[GPU_NODES_MAX]);

#endif
