#include "ops/ops.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/names.h"
#include "lib/ports.h"
#include "runtime/net/net.h"

/* Room for every field at its longest, twice over for JSON escapes. */
#define SPEC_MAX (2 * (IMAGE_NAME_MAX + ENTRYPOINT_MAX + ENV_MAX))
#define KEY_SHOWN 64 /* how much of a bad key an error message quotes */

enum { SEEN_IMAGE = 1, SEEN_ENTRYPOINT = 2, SEEN_GPU = 4, SEEN_RES = 8 /* << res_kind */ };
#define SEEN_TIMEOUT (SEEN_RES << 3) /* past the three SEEN_RES bits */
#define SEEN_PORTS (SEEN_TIMEOUT << 1)
#define SEEN_NETWORK (SEEN_PORTS << 1)

struct parse {
	struct sandbox_spec *out;
	size_t env_len;
	unsigned seen; /* SEEN_*: each key but env may appear once */
	struct err *e;
};

static bool is_alpha(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool is_env_key(const char *s, size_t n)
{
	if (n == 0 || !(is_alpha(s[0]) || s[0] == '_'))
		return false;
	for (size_t i = 1; i < n; i++)
		if (!is_alpha(s[i]) && !is_digit(s[i]) && s[i] != '_')
			return false;
	return true;
}

static int once(struct parse *p, unsigned flag, const char *key)
{
	if (p->seen & flag)
		return err_set(p->e, EINVAL, "key '%s' appears twice in sandbox spec", key);
	p->seen |= flag;
	return 0;
}

static int set_image(struct parse *p, const char *value)
{
	if (!image_name_ok(value))
		return err_set(p->e, EINVAL,
			       "bad image name '%.*s' in sandbox spec: use letters, digits, '.', "
			       "'_' and '-', at most %d characters",
			       IMAGE_NAME_LEN_MAX, value, IMAGE_NAME_LEN_MAX);
	int r = once(p, SEEN_IMAGE, "image");
	if (r < 0)
		return r;
	memcpy(p->out->image, value, strlen(value) + 1);
	return 0;
}

static int set_entrypoint(struct parse *p, const char *value)
{
	size_t n = strlen(value);
	if (n >= sizeof(p->out->entrypoint))
		return err_set(p->e, EINVAL, "entrypoint in sandbox spec is longer than %zu bytes",
			       sizeof(p->out->entrypoint) - 1);
	/* It is shown and set as one line of the `entrypoint` file. */
	if (!text_ok(value, sizeof(p->out->entrypoint)))
		return err_set(p->e, EINVAL,
			       "entrypoint in sandbox spec is more than one line or holds a "
			       "control character");
	int r = once(p, SEEN_ENTRYPOINT, "entrypoint");
	if (r < 0)
		return r;
	memcpy(p->out->entrypoint, value, n + 1);
	return 0;
}

static int set_gpu(struct parse *p, bool gpu)
{
	int r = once(p, SEEN_GPU, "gpu");
	if (r < 0)
		return r;
	p->out->gpu = gpu;
	return 0;
}

static int set_gpu_word(struct parse *p, const char *value)
{
	if (strcmp(value, "0") != 0 && strcmp(value, "1") != 0)
		return err_set(p->e, EINVAL, "gpu in sandbox spec must be 0 or 1, not '%.*s'",
			       KEY_SHOWN, value);
	return set_gpu(p, value[0] == '1');
}

/* `network`: none or egress (runtime/net/net.h). */
static int set_network(struct parse *p, const char *value)
{
	int r = once(p, SEEN_NETWORK, "network");
	if (r == 0 && sandbox_network_parse(value, &p->out->network) < 0)
		r = err_set(p->e, EINVAL,
			    "network in sandbox spec must be none or egress, not '%.*s'", KEY_SHOWN,
			    value);
	return r;
}

/* `timeout`: "SECONDS [terminate|suspend]" as its control file takes it (ops/ops_timer.c). */
static int set_timeout(struct parse *p, const char *value)
{
	int r = once(p, SEEN_TIMEOUT, "timeout");
	if (r == 0)
		r = ops_timeout_parse(value, &p->out->timeout_s, &p->out->timeout_action, p->e);
	p->out->timeout_set = r == 0;
	return r;
}

static int json_timeout(struct parse *p, const cJSON *t)
{
	char text[32];
	if (cJSON_IsString(t))
		return set_timeout(p, t->valuestring);
	/* A number as its digits: 1e99, -1 and 2.5 are then refused as the file refuses them. */
	if (!cJSON_IsNumber(t) || !(t->valuedouble >= 0 && t->valuedouble < 1e15) ||
	    t->valuedouble != (double)(int64_t)t->valuedouble)
		return err_set(p->e, EINVAL,
			       "timeout in sandbox spec must be a whole number of seconds or "
			       "\"SECONDS [terminate|suspend]\"");
	snprintf(text, sizeof(text), "%lld", (long long)t->valuedouble);
	return set_timeout(p, text);
}

/* `ports`: the sandbox ports it publishes as it is made (docs/network.md, "Published ports"). */
static int set_ports(struct parse *p, const char *value)
{
	struct ports list;
	int r = once(p, SEEN_PORTS, "ports");
	if (r == 0)
		r = ports_list_parse(value, &list, p->e);
	if (r == 0)
		ports_encode(&list, false, p->out->ports);
	return r;
}

/* A JSON array of port numbers, or the words a key=value line takes. */
static int json_ports(struct parse *p, const cJSON *ports)
{
	char words[PORTS_TEXT_MAX];
	size_t len = 0;
	const cJSON *item = NULL;
	if (cJSON_IsString(ports))
		return set_ports(p, ports->valuestring);
	if (cJSON_IsArray(ports)) {
		cJSON_ArrayForEach(item, ports)
		{
			double v = item->valuedouble;
			if (!cJSON_IsNumber(item) || !(v >= 1 && v <= 65535) ||
			    v != (double)(int)v || len >= sizeof(words) - 8)
				break;
			len += (size_t)snprintf(words + len, sizeof(words) - len, "%d ", (int)v);
		}
	}
	if (!cJSON_IsArray(ports) || item)
		return err_set(
		    p->e, EINVAL,
		    "ports in sandbox spec must be an array of port numbers (1 to 65535)");
	words[len] = '\0';
	return set_ports(p, words);
}

/* Is @key (of @n bytes) already set in the "K=V\n" lines of @env? */
static bool env_has(const char *env, const char *key, size_t n)
{
	for (const char *line = env; *line; line = strchr(line, '\n') + 1)
		if (strncmp(line, key, n) == 0 && line[n] == '=')
			return true;
	return false;
}

/* Append "KEY=VALUE\n"; the key is the first @keylen bytes of @key. */
static int add_env(struct parse *p, const char *key, size_t keylen, const char *value)
{
	if (!is_env_key(key, keylen))
		return err_set(p->e, EINVAL,
			       "bad env name '%.*s' in sandbox spec: use letters, digits and '_', "
			       "not starting with a digit",
			       (int)(keylen < KEY_SHOWN ? keylen : KEY_SHOWN), key);
	if (strchr(value, '\n'))
		return err_set(p->e, EINVAL, "env %.*s in sandbox spec has a newline in its value",
			       (int)keylen, key);
	if (env_has(p->out->env, key, keylen))
		return err_set(p->e, EINVAL, "env %.*s appears twice in sandbox spec", (int)keylen,
			       key);
	size_t vlen = strlen(value);
	char *end = p->out->env + p->env_len;
	if (p->env_len + keylen + vlen + 2 >= sizeof(p->out->env))
		return err_set(p->e, EINVAL, "env in sandbox spec is longer than %zu bytes",
			       sizeof(p->out->env) - 1);
	memcpy(end, key, keylen);
	end[keylen] = '=';
	memcpy(end + keylen + 1, value, vlen);
	end[keylen + 1 + vlen] = '\n';
	end[keylen + 2 + vlen] = '\0';
	p->env_len += keylen + vlen + 2;
	return 0;
}

static int add_env_line(struct parse *p, const char *line)
{
	const char *eq = strchr(line, '=');
	if (!eq)
		return err_set(p->e, EINVAL, "env '%.*s' in sandbox spec is not KEY=VALUE",
			       KEY_SHOWN, line);
	return add_env(p, line, (size_t)(eq - line), eq + 1);
}

/* One `egress` rule (repeatable): appended, and the rules so far checked as the file takes them. */
static int add_egress_line(struct parse *p, const char *line)
{
	struct net_rule rules[NET_RULES_MAX];
	char *text = p->out->egress;
	size_t have = strlen(text), n = strlen(line);
	int count;
	if (strchr(line, '\n') || have + n + 2 > sizeof(p->out->egress))
		return err_set(p->e, EINVAL, "egress in sandbox spec is longer than %zu bytes",
			       sizeof(p->out->egress) - 2);
	memcpy(text + have, line, n);
	memcpy(text + have + n, "\n", 2);
	return net_rules_parse(text, rules, &count, p->e);
}

static int json_egress(struct parse *p, const cJSON *egress)
{
	const cJSON *item;
	if (!cJSON_IsArray(egress))
		return err_set(
		    p->e, EINVAL,
		    "egress in sandbox spec must be an array of \"allow|deny CIDR\" strings");
	cJSON_ArrayForEach(item, egress)
	{
		int r = cJSON_IsString(item)
			    ? add_egress_line(p, item->valuestring)
			    : err_set(p->e, EINVAL, "egress in sandbox spec holds a non-string");
		if (r < 0)
			return r;
	}
	return 0;
}

static int unknown_key(struct parse *p, const char *key)
{
	return err_set(p->e, EINVAL, "unknown key '%.*s' in sandbox spec", KEY_SHOWN, key);
}

/* memory, cpus or pids (lib/size.h); -ENOENT for another key. */
static int set_res(struct parse *p, const char *key, const char *value)
{
	enum res_kind kind;
	if (res_kind_parse(key, &kind) < 0)
		return -ENOENT;
	int r = once(p, SEEN_RES << kind, key);
	return r < 0 ? r : res_parse(kind, value, "sandbox spec", &p->out->res, p->e);
}

/* One key with a string value, from either format. */
static int set_field(struct parse *p, const char *key, const char *value)
{
	int r = set_res(p, key, value);
	if (r != -ENOENT)
		return r;
	if (strcmp(key, "image") == 0)
		return set_image(p, value);
	if (strcmp(key, "entrypoint") == 0)
		return set_entrypoint(p, value);
	if (strcmp(key, "env") == 0)
		return add_env_line(p, value);
	if (strcmp(key, "gpu") == 0)
		return set_gpu_word(p, value);
	if (strcmp(key, "timeout") == 0)
		return set_timeout(p, value);
	if (strcmp(key, "ports") == 0)
		return set_ports(p, value);
	if (strcmp(key, "network") == 0)
		return set_network(p, value);
	if (strcmp(key, "egress") == 0)
		return add_egress_line(p, value);
	return unknown_key(p, key);
}

/* --- JSON --------------------------------------------------------------------- */

static int json_env(struct parse *p, const cJSON *env)
{
	const cJSON *item;
	if (cJSON_IsObject(env)) {
		cJSON_ArrayForEach(item, env)
		{
			if (!cJSON_IsString(item))
				return err_set(p->e, EINVAL,
					       "env %.*s in sandbox spec is not a string",
					       KEY_SHOWN, item->string);
			int r = add_env(p, item->string, strlen(item->string), item->valuestring);
			if (r < 0)
				return r;
		}
		return 0;
	}
	if (!cJSON_IsArray(env))
		return err_set(
		    p->e, EINVAL,
		    "env in sandbox spec must be an object or an array of \"K=V\" strings");
	cJSON_ArrayForEach(item, env)
	{
		if (!cJSON_IsString(item))
			return err_set(p->e, EINVAL,
				       "env in sandbox spec must be an array of \"K=V\" strings");
		int r = add_env_line(p, item->valuestring);
		if (r < 0)
			return r;
	}
	return 0;
}

static int json_gpu(struct parse *p, const cJSON *gpu)
{
	if (cJSON_IsBool(gpu))
		return set_gpu(p, cJSON_IsTrue(gpu));
	if (cJSON_IsString(gpu))
		return set_gpu_word(p, gpu->valuestring);
	if (cJSON_IsNumber(gpu) && (gpu->valuedouble == 0 || gpu->valuedouble == 1))
		return set_gpu(p, gpu->valuedouble == 1);
	return err_set(p->e, EINVAL, "gpu in sandbox spec must be 0, 1, true or false");
}

/* @text is NUL-terminated; anything after the object but blanks is an error. */
static int parse_json(struct parse *p, const char *text)
{
	cJSON *root = cJSON_ParseWithOpts(text, NULL, true);
	int r = 0;
	if (!root) {
		r = err_set(p->e, EINVAL, "sandbox spec is not valid JSON");
		goto out;
	}
	if (!cJSON_IsObject(root)) {
		r = err_set(p->e, EINVAL, "sandbox spec is not a JSON object");
		goto out;
	}
	const cJSON *item;
	cJSON_ArrayForEach(item, root)
	{
		const char *key = item->string;
		char num[RES_WORD_MAX];
		bool limit = res_kind_parse(key, &(enum res_kind){0}) == 0;
		if (limit && cJSON_IsNumber(item)) {
			/* "cpus": 0.5, "memory": 536870912: as the number's shortest text. */
			snprintf(num, sizeof(num), "%.15g", item->valuedouble);
			r = set_res(p, key, num);
		} else if (limit && !cJSON_IsString(item))
			r = err_set(p->e, EINVAL, "%s in sandbox spec must be a string or a number",
				    key);
		else if (strcmp(key, "env") == 0)
			r = json_env(p, item);
		else if (strcmp(key, "gpu") == 0)
			r = json_gpu(p, item);
		else if (strcmp(key, "timeout") == 0)
			r = json_timeout(p, item);
		else if (strcmp(key, "ports") == 0)
			r = json_ports(p, item);
		else if (strcmp(key, "egress") == 0)
			r = json_egress(p, item);
		else if (strcmp(key, "image") != 0 && strcmp(key, "entrypoint") != 0 &&
			 strcmp(key, "network") != 0 && !limit)
			r = unknown_key(p, key);
		else if (!cJSON_IsString(item))
			r = err_set(p->e, EINVAL, "%s in sandbox spec is not a string", key);
		else
			r = set_field(p, key, item->valuestring);
		if (r < 0)
			goto out;
	}
out:
	cJSON_Delete(root);
	return r;
}

/* --- key=value lines -------------------------------------------------------- */

static char *trim(char *s)
{
	s += strspn(s, " \t");
	char *end = s + strlen(s);
	while (end > s && (end[-1] == ' ' || end[-1] == '\t'))
		*--end = '\0';
	return s;
}

/* One line, NUL-terminated and ours to cut up: blank, a # comment, or key=value. */
static int parse_line(struct parse *p, char *line, int lineno)
{
	size_t n = strlen(line);
	if (n && line[n - 1] == '\r')
		line[n - 1] = '\0';
	const char *first = line + strspn(line, " \t");
	if (*first == '\0' || *first == '#')
		return 0;
	char *eq = strchr(line, '=');
	if (!eq)
		return err_set(p->e, EINVAL, "line %d of sandbox spec is not key=value", lineno);
	/* Blanks around the '=' are dropped; the rest of the value is taken as written. */
	*eq = '\0';
	const char *value = eq + 1 + strspn(eq + 1, " \t");
	return set_field(p, trim(line), value);
}

static int parse_lines(struct parse *p, char *text)
{
	int lineno = 1;
	for (char *line = text; line; lineno++) {
		char *next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		int r = parse_line(p, line, lineno);
		if (r < 0)
			return r;
		line = next;
	}
	return 0;
}

int spec_parse(const char *text, size_t len, struct sandbox_spec *out, struct err *e)
{
	memset(out, 0, sizeof(*out)); /* all of it again on every failure */
	struct parse p = {.out = out, .e = e};
	if (len > SPEC_MAX)
		return err_set(e, EINVAL, "sandbox spec is longer than %d bytes", SPEC_MAX);
	if (len && memchr(text, '\0', len))
		return err_set(e, EINVAL, "sandbox spec contains a NUL byte");
	_cleanup_free_ char *copy = strndup(text, len);
	if (!copy)
		return err_set(e, ENOMEM, "out of memory parsing sandbox spec");
	out->res = (struct resources){RES_UNSET, RES_UNSET, RES_UNSET};

	size_t skip = strspn(copy, " \t\r\n");
	int r = copy[skip] == '{' ? parse_json(&p, copy) : parse_lines(&p, copy);
	if (r == 0 && !(p.seen & SEEN_IMAGE))
		r = err_set(e, EINVAL, "sandbox spec has no image");
	if (r < 0) {
		memset(out, 0, sizeof(*out));
		return r;
	}
	if (out->entrypoint[0] == '\0')
		memcpy(out->entrypoint, OPS_DEFAULT_ENTRYPOINT, sizeof(OPS_DEFAULT_ENTRYPOINT));
	return 0;
}
