#include "runtime/gpu/gpu.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define INFO_MAX (64u << 10) /* most of a /proc/driver/nvidia file read */

/* --- the host ------------------------------------------------------------ */

static int read_at(const char *root, const char *path, char **text)
{
	char full[PATH_MAX];
	size_t len;
	if (xsnprintf(full, sizeof(full), "%s%s", root, path) < 0)
		return -ENAMETOOLONG;
	return read_file(full, text, &len, INFO_MAX);
}

static bool exists_at(const char *root, const char *path)
{
	char full[PATH_MAX];
	struct stat st;
	return xsnprintf(full, sizeof(full), "%s%s", root, path) >= 0 && lstat(full, &st) == 0;
}

static bool is_version_token(const char *w, size_t n)
{
	bool dot = false;
	if (n == 0 || !isdigit((unsigned char)w[0]))
		return false;
	for (size_t i = 0; i < n; i++) {
		if (w[i] == '.')
			dot = true;
		else if (!isdigit((unsigned char)w[i]))
			return false;
	}
	return dot;
}

int gpu_parse_driver_version(const char *text, char *out, size_t len)
{
	const char *line = strstr(text, "NVRM version:");
	if (!line)
		return -EINVAL;
	const char *p = line + strlen("NVRM version:");
	const char *end = p + strcspn(p, "\n");
	while (p < end) {
		p += strspn(p, " \t");
		size_t n = strcspn(p, " \t\n");
		if (p + n > end)
			n = (size_t)(end - p);
		if (is_version_token(p, n))
			return xsnprintf(out, len, "%.*s", (int)n, p) < 0 ? -ENAMETOOLONG : 0;
		p += n;
	}
	return -EINVAL;
}

int gpu_parse_model(const char *text, char *out, size_t len)
{
	for (const char *p = text; *p; p += strcspn(p, "\n"), p += (*p == '\n')) {
		if (!str_has_prefix(p, "Model:"))
			continue;
		const char *v = p + strlen("Model:");
		v += strspn(v, " \t");
		size_t n = strcspn(v, "\n");
		if (xsnprintf(out, len, "%.*s", (int)n, v) < 0)
			return -ENAMETOOLONG;
		return rstrip(out) > 0 ? 0 : -EINVAL;
	}
	return -EINVAL;
}

static int compare_models(const void *a, const void *b)
{
	return strcmp(a, b);
}

static int compare_uint(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
	return x < y ? -1 : x > y;
}

/* The N of every /dev/nvidiaN below @root, sorted; returns how many (at most @max). */
static size_t gpu_minors(const char *root, unsigned *minors, size_t max)
{
	char dir[PATH_MAX];
	size_t n = 0;
	if (xsnprintf(dir, sizeof(dir), "%s/dev", root) < 0)
		return 0;
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	for (struct dirent *de = readdir(d); de && n < max; de = readdir(d)) {
		const char *num = de->d_name + strlen("nvidia");
		if (!str_has_prefix(de->d_name, "nvidia") || !*num ||
		    strspn(num, "0123456789") != strlen(num) || strlen(num) > 6)
			continue;
		minors[n++] = (unsigned)strtoul(num, NULL, 10);
	}
	closedir(d);
	qsort(minors, n, sizeof(minors[0]), compare_uint);
	return n;
}

/* One model per directory of /proc/driver/nvidia/gpus ("unknown" if unreadable). */
static void gpu_models(const char *root, struct gpu_host *h)
{
	char dir[PATH_MAX];
	if (xsnprintf(dir, sizeof(dir), "%s/proc/driver/nvidia/gpus", root) < 0)
		return;
	DIR *d = opendir(dir);
	if (!d)
		return;
	for (struct dirent *de = readdir(d); de && h->ngpus < GPU_MAX; de = readdir(d)) {
		char rel[PATH_MAX];
		_cleanup_free_ char *text = NULL;
		if (de->d_name[0] == '.')
			continue;
		char *model = h->models[h->ngpus++];
		snprintf(model, GPU_MODEL_MAX, "unknown");
		if (xsnprintf(rel, sizeof(rel), "/proc/driver/nvidia/gpus/%s/information",
			      de->d_name) >= 0 &&
		    read_at(root, rel, &text) == 0 &&
		    gpu_parse_model(text, model, GPU_MODEL_MAX) < 0)
			snprintf(model, GPU_MODEL_MAX, "unknown");
	}
	closedir(d);
	qsort(h->models, h->ngpus, sizeof(h->models[0]), compare_models);
}

static void add_node(struct gpu_host *h, const char *path)
{
	if (h->nnodes < GPU_NODES_MAX)
		snprintf(h->nodes[h->nnodes++], GPU_NODE_MAX, "%s", path);
}

/* The first thing a GPU sandbox needs that the host lacks, in the order they matter. */
static void find_missing(const char *root, const struct gpu_host *h, size_t nminors, char *out,
			 size_t len)
{
	if (!exists_at(root, "/dev/nvidiactl"))
		snprintf(out, len, "/dev/nvidiactl is missing");
	else if (!h->driver[0])
		snprintf(out, len, "no NVIDIA driver is loaded (/proc/driver/nvidia/version)");
	else if (!exists_at(root, "/dev/nvidia-uvm"))
		snprintf(out, len, "/dev/nvidia-uvm is missing (load nvidia-uvm)");
	else if (nminors == 0)
		snprintf(out, len, "no GPU device node /dev/nvidiaN");
	else
		out[0] = '\0';
}

int gpu_host_probe(const char *root, struct gpu_host *out)
{
	unsigned minors[GPU_MAX];
	_cleanup_free_ char *version = NULL;
	memset(out, 0, sizeof(*out));
	if (read_at(root, "/proc/driver/nvidia/version", &version) == 0 &&
	    gpu_parse_driver_version(version, out->driver, sizeof(out->driver)) < 0)
		snprintf(out->driver, sizeof(out->driver), "unknown");
	gpu_models(root, out);
	size_t nminors = gpu_minors(root, minors, ARRAY_SIZE(minors));
	/* What nvproxy opens: the control node, UVM, and each GPU. */
	if (exists_at(root, "/dev/nvidiactl"))
		add_node(out, "/dev/nvidiactl");
	if (exists_at(root, "/dev/nvidia-uvm"))
		add_node(out, "/dev/nvidia-uvm");
	for (size_t i = 0; i < nminors; i++) {
		char node[GPU_NODE_MAX];
		snprintf(node, sizeof(node), "/dev/nvidia%u", minors[i]);
		add_node(out, node);
	}
	find_missing(root, out, nminors, out->missing, sizeof(out->missing));
	return 0;
}

int gpu_host_ready(const char *what, struct gpu_host *h, struct err *e)
{
	gpu_host_probe("", h);
	if (h->missing[0])
		return err_set(e, ENODEV, "cannot %s: gpu=1 needs an NVIDIA GPU and driver: %s",
			       what, h->missing);
	return 0;
}

size_t gpu_host_nodes(const struct gpu_host *h, const char *out[GPU_NODES_MAX])
{
	for (size_t i = 0; i < h->nnodes; i++)
		out[i] = h->nodes[i];
	return h->nnodes;
}

/* --- the host profile ------------------------------------------------------- */

int gpu_profile_add(cJSON *obj, const struct gpu_host *h)
{
	const char *models[GPU_MAX];
	for (size_t i = 0; i < h->ngpus; i++)
		models[i] = h->models[i];
	cJSON *arr = cJSON_CreateStringArray(models, (int)h->ngpus);
	if (!arr || !cJSON_AddStringToObject(obj, "gpu_driver", h->driver) ||
	    !cJSON_AddItemToObject(obj, "gpus", arr)) {
		cJSON_Delete(arr);
		return -ENOMEM;
	}
	return 0;
}

static const char *or_none(const char *s)
{
	return *s ? s : "none";
}

/* The recorded "gpus" array, sorted, into @models; returns how many. */
static size_t recorded_models(const cJSON *rec, char models[GPU_MAX][GPU_MODEL_MAX])
{
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(rec, "gpus");
	const cJSON *item;
	size_t n = 0;
	cJSON_ArrayForEach(item, arr)
	{
		if (n < GPU_MAX && cJSON_IsString(item))
			snprintf(models[n++], GPU_MODEL_MAX, "%s", item->valuestring);
	}
	qsort(models, n, GPU_MODEL_MAX, compare_models);
	return n;
}

static void add_model_list(struct strbuf *out, char models[][GPU_MODEL_MAX], size_t n)
{
	for (size_t i = 0; i < n; i++)
		strbuf_addf(out, "%s%s", i ? ", " : "", models[i]);
}

int gpu_profile_compare(const char *recorded_json, const struct gpu_host *h, struct strbuf *out)
{
	char models[GPU_MAX][GPU_MODEL_MAX];
	cJSON *rec = cJSON_Parse(recorded_json);
	int diffs = 0;
	if (!rec)
		return 0; /* host_compare() reports an unreadable profile */
	const cJSON *drv = cJSON_GetObjectItemCaseSensitive(rec, "gpu_driver");
	const char *driver = cJSON_IsString(drv) ? drv->valuestring : "";
	if (strcmp(driver, h->driver) != 0) {
		strbuf_addf(out, "GPU driver differs: snapshot %s, host %s\n", or_none(driver),
			    or_none(h->driver));
		diffs++;
	}
	size_t n = recorded_models(rec, models);
	cJSON_Delete(rec);
	bool same = n == h->ngpus;
	for (size_t i = 0; same && i < n; i++)
		same = strcmp(models[i], h->models[i]) == 0;
	if (n != h->ngpus) {
		strbuf_addf(out, "GPU count differs: snapshot %zu, host %zu\n", n, h->ngpus);
		diffs++;
	} else if (!same) {
		strbuf_adds(out, "GPU models differ: snapshot ");
		add_model_list(out, models, n);
		strbuf_adds(out, "; host ");
		add_model_list(out, (char(*)[GPU_MODEL_MAX])h->models, h->ngpus);
		strbuf_adds(out, "\n");
		diffs++;
	}
	int rc = strbuf_error(out);
	return rc < 0 ? rc : diffs;
}

int gpu_compare_host(const char *recorded_json, struct strbuf *out)
{
	struct gpu_host h;
	gpu_host_probe("", &h);
	return gpu_profile_compare(recorded_json, &h, out);
}
