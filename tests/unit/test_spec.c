#include "ops/ops.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/t.h"

static struct sandbox_spec spec;
static struct err e;

static int parse(const char *text)
{
	err_clear(&e);
	return spec_parse(text, strlen(text), &spec, &e);
}

/* @text is refused with EINVAL and a message containing @part. */
static void refused(const char *text, const char *part)
{
	int r = parse(text);
	CHECK(r == -EINVAL);
	CHECK(e.code == EINVAL);
	CHECK_MSG(strstr(e.msg, part) != NULL, "spec '%s': message '%s' lacks '%s'", text, e.msg,
		  part);
	CHECK_STR(spec.image, ""); /* nothing half-parsed is left */
}

/* @text is accepted as this spec; a NULL field (gpu -1) is not looked at. */
static void accepted(const char *text, const char *image, const char *entrypoint, const char *env,
		     int gpu)
{
	CHECK_MSG(parse(text) == 0, "spec '%s' refused: %s", text, e.msg);
	if (image)
		CHECK_STR(spec.image, image);
	if (entrypoint)
		CHECK_STR(spec.entrypoint, entrypoint);
	if (env)
		CHECK_STR(spec.env, env);
	if (gpu >= 0)
		CHECK_MSG(spec.gpu == (gpu == 1), "spec '%s': gpu %d, not %d", text, spec.gpu, gpu);
}

static void test_lines(void)
{
	accepted("image=alpine\n", "alpine", OPS_DEFAULT_ENTRYPOINT, "", 0);
	CHECK(e.code == 0);
	accepted("# a comment\n"
		 "\n"
		 "  image = my-img_1.2\r\n"
		 "entrypoint=echo a=b; sleep 1  \n"
		 "   # indented comment\n"
		 "env =\tA=1\n"
		 "env=_b2=x=y \n"
		 "env=EMPTY=\n"
		 "gpu=1",
		 "my-img_1.2", "echo a=b; sleep 1  ", "A=1\n_b2=x=y \nEMPTY=\n", 1);
	accepted("entrypoint=\nimage=a\ngpu=0\n", NULL, OPS_DEFAULT_ENTRYPOINT, NULL, 0);

	/* Not NUL-terminated: only @len bytes count. */
	err_clear(&e);
	CHECK(spec_parse("image=abcdef", 7, &spec, &e) == 0);
	CHECK_STR(spec.image, "a");
}

static void test_json(void)
{
	accepted(" \n{\"image\": \"ubuntu\", \"entrypoint\": \"python3 -m http.server\","
		 " \"env\": {\"PORT\": \"8000\", \"MSG\": \"a b=c\"}, \"gpu\": true}\n",
		 "ubuntu", "python3 -m http.server", "PORT=8000\nMSG=a b=c\n", 1);
	accepted("{\"image\":\"u\",\"env\":[\"A=1\",\"B=\"],\"entrypoint\":\"\"}", NULL,
		 OPS_DEFAULT_ENTRYPOINT, "A=1\nB=\n", 0);

	const struct {
		const char *gpu;
		bool want;
	} gpus[] = {
	    {"0", false},   {"1", true},      {"false", false},
	    {"true", true}, {"\"0\"", false}, {"\"1\"", true},
	};
	for (size_t i = 0; i < ARRAY_SIZE(gpus); i++) {
		char text[128];
		snprintf(text, sizeof(text), "{\"image\":\"u\",\"gpu\":%s}", gpus[i].gpu);
		accepted(text, NULL, NULL, NULL, gpus[i].want);
	}
	accepted("{\"image\":\"u\",\"env\":{}}", NULL, NULL, "", -1);
}

static void test_errors(void)
{
	/* Both formats. */
	refused("", "has no image");
	refused("# only a comment\n", "has no image");
	refused("gpu=1\n", "has no image");
	refused("{}", "has no image");
	refused("image=a\nfoo=1\n", "unknown key 'foo' in sandbox spec");
	refused("{\"image\":\"a\",\"foo\":1}", "unknown key 'foo' in sandbox spec");
	refused("image=a\nimage=b\n", "'image' appears twice");
	refused("{\"image\":\"a\",\"image\":\"b\"}", "'image' appears twice");
	refused("image=a\nentrypoint=x\nentrypoint=y\n", "'entrypoint' appears twice");
	refused("image=a\ngpu=0\ngpu=1\n", "'gpu' appears twice");

	/* Image names. */
	refused("image=\n", "bad image name ''");
	refused("image=-a\n", "bad image name '-a'");
	refused("image=.hidden\n", "bad image name");
	refused("image=a/b\n", "bad image name");
	refused("image=../etc\n", "bad image name");
	refused("image=a b\n", "bad image name");
	refused("image=a \n", "bad image name 'a '");
	refused("{\"image\":5}", "image in sandbox spec is not a string");
	char name[200];
	snprintf(name, sizeof(name), "image=%0128d", 0);
	CHECK(parse(name) == 0); /* 128 characters: the longest */
	snprintf(name, sizeof(name), "image=%0129d", 0);
	refused(name, "bad image name");

	/* Entrypoint. */
	refused("{\"image\":\"a\",\"entrypoint\":[\"sh\"]}", "entrypoint in sandbox spec is not");
	refused("{\"image\":\"a\",\"entrypoint\":\"a\\nb\"}", "more than one line");
	static char big[ENV_MAX + 64];
	snprintf(big, sizeof(big), "image=a\nentrypoint=%0*d\n", ENTRYPOINT_MAX, 0);
	refused(big, "entrypoint in sandbox spec is longer than 4096 bytes");
	snprintf(big, sizeof(big), "image=a\nentrypoint=%0*d\n", ENTRYPOINT_MAX - 1, 0);
	CHECK(parse(big) == 0);

	/* Env. */
	refused("image=a\nenv=NOEQUALS\n", "env 'NOEQUALS' in sandbox spec is not KEY=VALUE");
	refused("image=a\nenv=1A=x\n", "bad env name '1A'");
	refused("image=a\nenv==x\n", "bad env name ''");
	refused("image=a\nenv=A-B=x\n", "bad env name 'A-B'");
	refused("image=a\nenv=A=1\nenv=A=2\n", "env A appears twice");
	refused("{\"image\":\"a\",\"env\":{\"A B\":\"x\"}}", "bad env name 'A B'");
	refused("{\"image\":\"a\",\"env\":{\"A\":1}}", "env A in sandbox spec is not a string");
	refused("{\"image\":\"a\",\"env\":{\"A\":\"x\\ny\"}}", "has a newline");
	refused("{\"image\":\"a\",\"env\":[\"A=1\",2]}", "array of \"K=V\" strings");
	refused("{\"image\":\"a\",\"env\":[\"A\"]}", "not KEY=VALUE");
	refused("{\"image\":\"a\",\"env\":\"A=1\"}", "must be an object or an array");
	refused("{\"image\":\"a\",\"env\":{\"AB\":\"1\",\"AB\":\"2\"}}", "env AB appears twice");
	/* A prefix of a set key is another key. */
	CHECK(parse("image=a\nenv=AB=1\nenv=A=2\nenv=B=3\n") == 0);
	CHECK_STR(spec.env, "AB=1\nA=2\nB=3\n");
	/* Filling the env: the longest fits, a byte more is refused. */
	size_t value = ENV_MAX - 1 - strlen("A=\n");
	int n = snprintf(big, sizeof(big), "image=a\nenv=A=%0*d\n", (int)value, 0);
	CHECK(n > 0 && (size_t)n < sizeof(big));
	CHECK(parse(big) == 0);
	CHECK(strlen(spec.env) == ENV_MAX - 1);
	snprintf(big, sizeof(big), "image=a\nenv=A=%0*d\n", (int)value + 1, 0);
	refused(big, "env in sandbox spec is longer than 16383 bytes");

	/* Gpu. */
	refused("image=a\ngpu=2\n", "gpu in sandbox spec must be 0 or 1, not '2'");
	refused("image=a\ngpu=true\n", "must be 0 or 1");
	refused("image=a\ngpu=\n", "must be 0 or 1");
	refused("{\"image\":\"a\",\"gpu\":2}", "gpu in sandbox spec must be 0, 1, true or false");
	refused("{\"image\":\"a\",\"gpu\":0.5}", "must be 0, 1, true or false");
	refused("{\"image\":\"a\",\"gpu\":null}", "must be 0, 1, true or false");
	refused("{\"image\":\"a\",\"gpu\":\"yes\"}", "must be 0 or 1");

	/* Shape. */
	refused("image=a\njust words\n", "line 2 of sandbox spec is not key=value");
	refused("{\"image\":\"a\"", "sandbox spec is not valid JSON");
	refused("{\"image\":\"a\"} trailing", "sandbox spec is not valid JSON");
	refused("[\"image\"]", "line 1 of sandbox spec is not key=value");
	refused("{\"image\":\"a\"}\n{}", "not valid JSON");

	err_clear(&e);
	CHECK(spec_parse("image=a\0b", 9, &spec, &e) == -EINVAL);
	CHECK(strstr(e.msg, "NUL byte") != NULL);
	/* Refused before parsing, the spec is left all zero as after any refusal (limits too). */
	CHECK(spec.res.memory_bytes == 0 && spec.res.cpu_milli == 0 && spec.res.pids == 0);
	char *huge = calloc(1, 200000);
	if (huge) {
		memset(huge, '#', 199999);
		refused(huge, "sandbox spec is longer than");
		free(huge);
	}
	/* A NULL err is allowed. */
	CHECK(spec_parse("foo=1", 5, &spec, NULL) == -EINVAL);
}

/* `timeout`: as the file takes it, in both formats; unset, the daemon's default applies. */
static void test_timeout(void)
{
	CHECK(spec_parse("image=a\n", 8, &spec, &e) == 0 && !spec.timeout_set);
	const char *lines = "image=a\ntimeout=30 suspend\n";
	CHECK(spec_parse(lines, strlen(lines), &spec, &e) == 0 && spec.timeout_set &&
	      spec.timeout_s == 30 && spec.timeout_action == TIMEOUT_SUSPEND);
	const char *json = "{\"image\": \"a\", \"timeout\": 5}";
	CHECK(spec_parse(json, strlen(json), &spec, &e) == 0 && spec.timeout_set &&
	      spec.timeout_s == 5 && spec.timeout_action == TIMEOUT_TERMINATE);
	json = "{\"image\": \"a\", \"timeout\": \"0\"}";
	CHECK(spec_parse(json, strlen(json), &spec, &e) == 0 && spec.timeout_set &&
	      spec.timeout_s == 0);
	refused("image=a\ntimeout=1e99\n", "timeout must be a whole number of seconds");
	refused("image=a\ntimeout=-1\n", "timeout must be a whole number of seconds");
	refused("image=a\ntimeout=3 explode\n", "unknown word 'explode' for timeout");
	refused("image=a\ntimeout=99999999\n", "over the most");
	refused("{\"image\":\"a\",\"timeout\":1e99}", "timeout in sandbox spec must be");
	refused("{\"image\":\"a\",\"timeout\":-1}", "timeout in sandbox spec must be");
	refused("{\"image\":\"a\",\"timeout\":2.5}", "timeout in sandbox spec must be");
	refused("image=a\ntimeout=1\ntimeout=2\n", "'timeout' appears twice");
}

/* `ports`: published as the sandbox is made, on host ports the kernel picks (host ports 0). */
static void test_ports(void)
{
	CHECK(spec_parse("image=a\n", 8, &spec, &e) == 0 && !spec.ports[0]);
	const char *lines = "image=a\nports=8080  22\n";
	CHECK(spec_parse(lines, strlen(lines), &spec, &e) == 0);
	CHECK_STR(spec.ports, "8080 0\n22 0\n");
	const char *json = "{\"image\": \"a\", \"ports\": [8080, 9090]}";
	CHECK(spec_parse(json, strlen(json), &spec, &e) == 0);
	CHECK_STR(spec.ports, "8080 0\n9090 0\n");
	json = "{\"image\": \"a\", \"ports\": \"80\"}";
	CHECK(spec_parse(json, strlen(json), &spec, &e) == 0);
	CHECK_STR(spec.ports, "80 0\n");
	refused("image=a\nports=0\n", "bad ports '0'");
	refused("image=a\nports=80 80\n", "each once");
	refused("image=a\nports=80x\n", "bad ports");
	refused("image=a\nports=1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17\n", "at most 16");
	refused("image=a\nports=80\nports=81\n", "'ports' appears twice");
	refused("{\"image\":\"a\",\"ports\":[80.5]}", "array of port numbers");
	refused("{\"image\":\"a\",\"ports\":[65536]}", "array of port numbers");
	refused("{\"image\":\"a\",\"ports\":[\"80\"]}", "array of port numbers");
	refused("{\"image\":\"a\",\"ports\":80}", "array of port numbers");
}

/* `network`: none (the default) or egress, in both formats. */
static void test_network(void)
{
	CHECK(spec_parse("image=a\n", 8, &spec, &e) == 0 && spec.network == SB_NET_NONE);
	const char *lines = "image=a\nnetwork=egress\n";
	CHECK(spec_parse(lines, strlen(lines), &spec, &e) == 0 && spec.network == SB_NET_EGRESS);
	const char *json = "{\"image\": \"a\", \"network\": \"egress\"}";
	CHECK(spec_parse(json, strlen(json), &spec, &e) == 0 && spec.network == SB_NET_EGRESS);
	refused("image=a\nnetwork=host\n", "network in sandbox spec must be none or egress");
	refused("{\"image\":\"a\",\"network\":1}", "network in sandbox spec is not a string");
	refused("image=a\nnetwork=none\nnetwork=egress\n", "'network' appears twice");
	lines = "image=a\nnetwork=egress\negress=deny 10.0.0.0/8\negress=allow 0.0.0.0/0\n";
	CHECK(spec_parse(lines, strlen(lines), &spec, &e) == 0);
	CHECK_STR(spec.egress, "deny 10.0.0.0/8\nallow 0.0.0.0/0\n");
	json = "{\"image\": \"a\", \"egress\": [\"deny 1.2.3.4\"]}";
	CHECK(spec_parse(json, strlen(json), &spec, &e) == 0);
	CHECK_STR(spec.egress, "deny 1.2.3.4\n");
	refused("image=a\negress=deny 1.2.3.4\negress=permit 5.6.7.8\n", "egress line 2");
	refused("{\"image\":\"a\",\"egress\":\"deny 1.2.3.4\"}", "must be an array");
	refused("{\"image\":\"a\",\"egress\":[1]}", "holds a non-string");
}

/* memory, cpus, pids: either format; unset is RES_UNSET (the daemon's default applies). */
static void test_limits(void)
{
	CHECK(parse("image=busybox") == 0);
	CHECK(spec.res.memory_bytes == RES_UNSET && spec.res.cpu_milli == RES_UNSET &&
	      spec.res.pids == RES_UNSET);
	CHECK(parse("image=busybox\nmemory=512M\ncpus=0.5\npids=64") == 0);
	CHECK(spec.res.memory_bytes == 512LL << 20 && spec.res.cpu_milli == 500 &&
	      spec.res.pids == 64);
	CHECK(parse("image=busybox\nmemory=0") == 0 && spec.res.memory_bytes == 0);
	CHECK(parse("{\"image\":\"busybox\",\"memory\":\"2G\",\"cpus\":1.5,\"pids\":128}") == 0);
	CHECK(spec.res.memory_bytes == 2LL << 30 && spec.res.cpu_milli == 1500 &&
	      spec.res.pids == 128);
	CHECK(parse("{\"image\":\"busybox\",\"memory\":268435456}") == 0);
	CHECK(spec.res.memory_bytes == 256LL << 20);
	refused("image=busybox\nmemory=-1", "bad memory for sandbox spec");
	refused("image=busybox\ncpus=abc", "bad cpus for sandbox spec");
	refused("image=busybox\nmemory=99999999999999999999G", "bad memory");
	refused("image=busybox\npids=1e99", "bad pids");
	refused("{\"image\":\"busybox\",\"cpus\":1e99}", "bad cpus");
	refused("{\"image\":\"busybox\",\"memory\":true}",
		"memory in sandbox spec must be a string or a number");
	refused("image=busybox\nmemory=1G\nmemory=2G", "appears twice");
}

int main(void)
{
	test_limits();
	test_lines();
	test_json();
	test_errors();
	test_timeout();
	test_ports();
	test_network();
	return t_done();
}
