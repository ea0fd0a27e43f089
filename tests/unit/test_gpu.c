#include "runtime/gpu/gpu.h"
#include "runtime/gpu/cuda.h"
#include "runtime/runsc/runsc.h"
#include "lib/strbuf.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/unit/t.h"

static char base[64];

static void put(const char *rel, const char *data)
{
	char path[PATH_MAX], dir[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", base, rel);
	snprintf(dir, sizeof(dir), "%s", path);
	*strrchr(dir, '/') = '\0';
	CHECK(mkdir_p(dir, 0755) == 0);
	CHECK(write_file_durable(path, data, strlen(data)) == 0);
}

static void test_parsers(void)
{
	char out[GPU_DRIVER_MAX], model[GPU_MODEL_MAX];
	CHECK(
	    gpu_parse_driver_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  "
				     "Sat Aug 19 01:15:15 UTC 2023\nGCC version:  gcc 12\n",
				     out, sizeof(out)) == 0);
	CHECK_STR(out, "535.104.05");
	CHECK(gpu_parse_driver_version("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  "
				       "550.54.15  Release Build  (dvs-builder@U16)  Tue Mar  5\n",
				       out, sizeof(out)) == 0);
	CHECK_STR(out, "550.54.15");
	CHECK(gpu_parse_driver_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module\n", out,
				       sizeof(out)) == -EINVAL);
	CHECK(gpu_parse_driver_version("something else 1.2\n", out, sizeof(out)) == -EINVAL);

	CHECK(gpu_parse_model("Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 45\n", model,
			      sizeof(model)) == 0);
	CHECK_STR(model, "NVIDIA H100 80GB HBM3");
	CHECK(gpu_parse_model("IRQ: 4\nModel:\t Tesla T4  \n", model, sizeof(model)) == 0);
	CHECK_STR(model, "Tesla T4");
	CHECK(gpu_parse_model("IRQ: 4\n", model, sizeof(model)) == -EINVAL);
	CHECK(gpu_parse_model("Model:   \n", model, sizeof(model)) == -EINVAL);
}

static void test_probe(void)
{
	struct gpu_host h;
	CHECK(gpu_host_probe(base, &h) == 0);
	CHECK_STR(h.missing, "/dev/nvidiactl is missing");
	CHECK_STR(h.driver, "");
	CHECK(h.ngpus == 0 && h.nnodes == 0);

	put("dev/nvidiactl", "");
	gpu_host_probe(base, &h);
	CHECK(strstr(h.missing, "no NVIDIA driver") != NULL);
	put("proc/driver/nvidia/version",
	    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 2024\n");
	gpu_host_probe(base, &h);
	CHECK_STR(h.driver, "550.54.15");
	CHECK(strstr(h.missing, "/dev/nvidia-uvm is missing") != NULL);
	put("dev/nvidia-uvm", "");
	gpu_host_probe(base, &h);
	CHECK(strstr(h.missing, "no GPU device node") != NULL);

	put("dev/nvidia10", "");
	put("dev/nvidia2", "");
	put("dev/nvidia-modeset", "");
	put("dev/nvidia-uvm-tools", "");
	put("proc/driver/nvidia/gpus/0000:02:00.0/information", "Model: \t Tesla T4\n");
	put("proc/driver/nvidia/gpus/0000:01:00.0/information", "Model: \t NVIDIA A100\n");
	gpu_host_probe(base, &h);
	CHECK_STR(h.missing, "");
	CHECK(h.nnodes == 4);
	CHECK_STR(h.nodes[0], "/dev/nvidiactl");
	CHECK_STR(h.nodes[1], "/dev/nvidia-uvm");
	CHECK_STR(h.nodes[2], "/dev/nvidia2");
	CHECK_STR(h.nodes[3], "/dev/nvidia10");
	/* What a GPU sandbox's bundle lists (test_bundle.c writes one). */
	const char *nodes[GPU_NODES_MAX];
	CHECK(gpu_host_nodes(&h, nodes) == 4);
	CHECK_STR(nodes[0], "/dev/nvidiactl");
	CHECK_STR(nodes[3], "/dev/nvidia10");
	CHECK(h.ngpus == 2);
	CHECK_STR(h.models[0], "NVIDIA A100");
	CHECK_STR(h.models[1], "Tesla T4");
}

static int compare(const char *recorded, const struct gpu_host *h, struct strbuf *out)
{
	strbuf_reset(out);
	return gpu_profile_compare(recorded, h, out);
}

static void test_profile(void)
{
	struct gpu_host h = {0}, none = {0};
	_cleanup_strbuf_ struct strbuf out = STRBUF_INIT;
	snprintf(h.driver, sizeof(h.driver), "550.54.15");
	h.ngpus = 2;
	snprintf(h.models[0], GPU_MODEL_MAX, "NVIDIA A100");
	snprintf(h.models[1], GPU_MODEL_MAX, "Tesla T4");

	cJSON *obj = cJSON_CreateObject();
	CHECK(gpu_profile_add(obj, &h) == 0);
	char *text = cJSON_PrintUnformatted(obj);
	cJSON_Delete(obj);
	CHECK_STR(text, "{\"gpu_driver\":\"550.54.15\",\"gpus\":[\"NVIDIA A100\",\"Tesla T4\"]}");
	CHECK(compare(text, &h, &out) == 0 && out.len == 0);

	CHECK(compare(text, &none, &out) == 2);
	CHECK(strstr(strbuf_str(&out), "GPU driver differs: snapshot 550.54.15, host none\n"));
	CHECK(strstr(strbuf_str(&out), "GPU count differs: snapshot 2, host 0\n"));
	free(text);

	/* Recorded in another order: the models are compared sorted. */
	CHECK(compare("{\"gpu_driver\":\"550.54.15\",\"gpus\":[\"Tesla T4\",\"NVIDIA A100\"]}", &h,
		      &out) == 0);
	CHECK(compare("{\"gpu_driver\":\"550.54.15\",\"gpus\":[\"Tesla T4\",\"Tesla T4\"]}", &h,
		      &out) == 1);
	CHECK_STR(strbuf_str(&out),
		  "GPU models differ: snapshot Tesla T4, Tesla T4; host NVIDIA A100, Tesla T4\n");
	CHECK(compare("{\"gpu_driver\":\"535.1\",\"gpus\":[\"NVIDIA A100\",\"Tesla T4\"]}", &h,
		      &out) == 1);
	CHECK_STR(strbuf_str(&out), "GPU driver differs: snapshot 535.1, host 550.54.15\n");
	/* A profile from before GPUs were recorded, on a host without: nothing differs. */
	CHECK(compare("{\"gpu_driver\":\"\"}", &none, &out) == 0);
	CHECK(compare("{\"cpu_features\":\"sse\"}", &none, &out) == 0);
	CHECK(compare("not json", &h, &out) == 0);
}

static const char help_20240729[] =
    "checkpoint [flags] <container id> - save current state of container.\n"
    "  -compression value\n"
    "    \tcompress checkpoint image on disk. Values: none|flate-best-speed.\n"
    "  -image-path string\n"
    "    \tdirectory path to saved container image\n"
    "  -leave-running\n"
    "    \trestart the container after checkpointing\n";

static void test_help(void)
{
	CHECK(!runsc_help_has_flag(help_20240729, "cuda-checkpoint-path"));
	CHECK(runsc_help_has_flag(help_20240729, "leave-running"));
	CHECK(!runsc_help_has_flag(help_20240729, "leave"));
	CHECK(runsc_help_has_flag("  -cuda-checkpoint-path string\n    \tpath to cuda-checkpoint\n",
				  "cuda-checkpoint-path"));
	CHECK(runsc_help_has_flag("  --cuda-checkpoint-path=PATH\n", "cuda-checkpoint-path"));
	CHECK(runsc_help_has_flag("x\n  -cuda-checkpoint-path", "cuda-checkpoint-path"));
	CHECK(!runsc_help_has_flag("  -cuda-checkpoint-paths string\n", "cuda-checkpoint-path"));
	CHECK(!runsc_help_has_flag("    \tuse -cuda-checkpoint-path with it\n",
				   "cuda-checkpoint-path"));
	CHECK(!runsc_help_has_flag("", "cuda-checkpoint-path"));
}

static void test_driver_rule(void)
{
	/*
	 * Every case of (gpu, the image ships the tool, the host has it, runsc
	 * drives CUDA), the bits of i from the top: None, Snapfs, Runsc or
	 * Unavailable. snapfs runs the host's tool, never the image's; runsc,
	 * when it can, its path in the image.
	 */
	static const char want[] = "NNNNNNSS"
				   "UUSSURSR";
	static const enum cuda_driver drivers[] = {['N'] = CUDA_NONE,
						   ['S'] = CUDA_BY_SNAPFS,
						   ['R'] = CUDA_BY_RUNSC,
						   ['U'] = CUDA_UNAVAILABLE};
	for (unsigned i = 0; i < 16; i++)
		CHECK_MSG(cuda_driver_for(i & 8, i & 4, i & 2, i & 1) == drivers[(int)want[i]],
			  "cuda_driver_for(%u, %u, %u, %u) is not %c", i >> 3, i >> 2 & 1,
			  i >> 1 & 1, i & 1, want[i]);

	char img[PATH_MAX];
	snprintf(img, sizeof(img), "%s/img", base);
	CHECK(!cuda_image_has_tool(img));
	put("img/usr/bin/cuda-checkpoint", "#!/bin/sh\n");
	CHECK(cuda_image_has_tool(img));
}

/* The host's tool: a script is read (bounded), a binary only opened. */
static void test_tool_open(void)
{
	struct cuda_tool t;
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/tool-script", base);
	put("tool-script", "#!/bin/sh\necho running\n");
	CHECK(cuda_tool_open(path, &t) == 0);
	CHECK(t.fd >= 0);
	CHECK_STR(t.script, "#!/bin/sh\necho running\n");
	cuda_tool_close(&t);
	CHECK(t.fd == -1 && t.script == NULL);
	snprintf(path, sizeof(path), "%s/tool-elf", base);
	put("tool-elf", "\x7f"
			"ELF...");
	CHECK(cuda_tool_open(path, &t) == 0);
	CHECK(t.fd >= 0 && t.script == NULL);
	cuda_tool_close(&t);
	_cleanup_strbuf_ struct strbuf big = STRBUF_INIT;
	strbuf_adds(&big, "#!/bin/sh\n");
	while (big.len <= GPU_SCRIPT_MAX && strbuf_error(&big) == 0)
		strbuf_adds(&big, "# padding padding padding padding padding padding padding\n");
	put("tool-big", strbuf_str(&big));
	snprintf(path, sizeof(path), "%s/tool-big", base);
	CHECK(cuda_tool_open(path, &t) == -EFBIG);
	CHECK(t.fd == -1);
	CHECK(cuda_tool_open(base, &t) == -EINVAL);
	snprintf(path, sizeof(path), "%s/no-such-tool", base);
	CHECK(cuda_tool_open(path, &t) == -ENOENT);
}

/* Every cuda-checkpoint call has a deadline; moving GPU memory gets more. */
static void test_call_timeouts(void)
{
	struct runsc rs = {.timeout_ms = 60000};
	CHECK(cuda_call_timeout_ms(&rs, "get-state") == 60000);
	CHECK(cuda_call_timeout_ms(&rs, "unlock") == 60000);
	CHECK(cuda_call_timeout_ms(&rs, "lock") == 60000 + GPU_LOCK_TIMEOUT_MS);
	CHECK(cuda_call_timeout_ms(&rs, "checkpoint") == 60000 * GPU_MOVE_FACTOR);
	CHECK(cuda_call_timeout_ms(&rs, "restore") == 60000 * GPU_MOVE_FACTOR);
	/* checkpoint and restore: the base plus RUNSC_PER_GIB_MS a GiB, pro rata, never overflowing
	 */
	CHECK(runsc_scaled_timeout_ms(&rs, 0) == 60000);
	CHECK(runsc_scaled_timeout_ms(&rs, -1) == 60000);
	CHECK(runsc_scaled_timeout_ms(&rs, 1ll << 30) == 60000 + RUNSC_PER_GIB_MS);
	CHECK(runsc_scaled_timeout_ms(&rs, 512ll << 20) == 60000 + RUNSC_PER_GIB_MS / 2);
	CHECK(runsc_scaled_timeout_ms(&rs, INT64_MAX) > 60000);
	struct runsc huge = {.timeout_ms = INT64_MAX - 1};
	CHECK(runsc_scaled_timeout_ms(&huge, 1ll << 30) == INT64_MAX / 2);
}

static void test_states(void)
{
	CHECK(cuda_state_parse("running\n") == CUDA_RUNNING);
	CHECK(cuda_state_parse("  Locked") == CUDA_LOCKED);
	CHECK(cuda_state_parse("checkpointed") == CUDA_CHECKPOINTED);
	CHECK(cuda_state_parse("failed\n") == CUDA_FAILED);
	CHECK(cuda_state_parse("run") == CUDA_UNKNOWN);
	CHECK(cuda_state_parse("runningx") == CUDA_UNKNOWN);
	CHECK(cuda_state_parse("") == CUDA_UNKNOWN);
	CHECK_STR(cuda_state_name(CUDA_CHECKPOINTED), "checkpointed");
}

static void test_outcome(void)
{
	struct cuda_procs p = {.n = 2};
	_cleanup_strbuf_ struct strbuf out = STRBUF_INIT;
	p.p[0] = (struct cuda_proc){1, CUDA_RUNNING, CUDA_RUNNING};
	p.p[1] = (struct cuda_proc){12, CUDA_LOCKED, CUDA_LOCKED};
	cuda_outcome(&p, &out);
	CHECK_STR(strbuf_str(&out), "CUDA processes back as before: 1 running, 12 locked");
	strbuf_reset(&out);
	p.p[0].now = CUDA_CHECKPOINTED;
	cuda_outcome(&p, &out);
	CHECK_STR(strbuf_str(&out), "CUDA processes not back: 1 checkpointed (was running)");
}

static void test_record(void)
{
	struct cuda_procs p = {.n = 2}, q;
	char dir[PATH_MAX];
	p.p[0] = (struct cuda_proc){1, CUDA_RUNNING, CUDA_CHECKPOINTED};
	p.p[1] = (struct cuda_proc){42, CUDA_LOCKED, CUDA_CHECKPOINTED};
	snprintf(dir, sizeof(dir), "%s/spool", base);
	CHECK(mkdir_p(dir, 0700) == 0);
	CHECK(cuda_record_read(dir, &q, NULL) == -ENOENT);
	CHECK(cuda_record_write(dir, &p, NULL) == 0);
	CHECK(cuda_record_read(dir, &q, NULL) == 0);
	CHECK(q.n == 2 && q.p[0].pid == 1 && q.p[0].before == CUDA_RUNNING &&
	      q.p[0].now == CUDA_CHECKPOINTED);
	CHECK(q.p[1].pid == 42 && q.p[1].before == CUDA_LOCKED);

	cJSON *meta = cJSON_CreateObject();
	cuda_manifest_meta(meta, dir);
	char *text = cJSON_PrintUnformatted(meta);
	CHECK_STR(text, "{\"cuda_processes\":[{\"pid\":1,\"before\":\"running\",\"at_checkpoint\":"
			"\"checkpointed\"},{\"pid\":42,\"before\":\"locked\",\"at_checkpoint\":"
			"\"checkpointed\"}]}");
	free(text);
	cJSON_Delete(meta);

	put("spool/" GPU_RECORD_FILE, "{\"processes\":[{\"pid\":-1}]}");
	CHECK(cuda_record_read(dir, &q, NULL) == -EIO);
	cJSON *bad = cJSON_Parse("[{\"pid\":3,\"before\":\"running\"}]");
	CHECK(cuda_procs_from_json(bad, &q) == -EINVAL);
	cJSON_Delete(bad);
}

int main(void)
{
	snprintf(base, sizeof(base), "/tmp/snapfs-test-gpu.XXXXXX");
	if (!mkdtemp(base))
		return 1;
	static void (*const tests[])(void) = {
	    test_parsers,	test_probe,	test_profile, test_help,    test_driver_rule,
	    test_call_timeouts, test_tool_open, test_states,  test_outcome, test_record,
	};
	for (size_t i = 0; i < ARRAY_SIZE(tests); i++)
		tests[i]();
	rm_rf(base);
	return t_done();
}
