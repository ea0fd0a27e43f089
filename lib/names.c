#include "lib/names.h"

#include <string.h>

static bool is_lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool is_alnum(char c)
{
	return is_lower_alnum(c) || (c >= 'A' && c <= 'Z');
}

bool name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > NAME_LEN_MAX || !is_lower_alnum(s[0]))
		return false;
	return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

bool sandbox_id_ok(const char *s)
{
	return name_ok(s) && strcmp(s, "index") != 0 && strcmp(s, "new") != 0;
}

static bool prefixed_hex_ok(const char *s, const char *prefix, size_t hex)
{
	size_t p = strlen(prefix);
	if (strncmp(s, prefix, p) != 0 || strlen(s + p) != hex)
		return false;
	return strspn(s + p, "0123456789abcdef") == hex;
}

bool generated_id_ok(const char *s, const char *prefix)
{
	return prefixed_hex_ok(s, prefix, GENERATED_ID_HEX);
}

bool runtime_id_ok(const char *s)
{
	return prefixed_hex_ok(s, RUNTIME_ID_PREFIX, RUNTIME_ID_HEX);
}

bool image_name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > IMAGE_NAME_LEN_MAX || !is_alnum(s[0]))
		return false;
	for (size_t i = 1; i < n; i++)
		if (!is_alnum(s[i]) && !strchr("._-", s[i]))
			return false;
	return true;
}

bool image_digest_ok(const char *s)
{
	static const char prefix[] = "sha256:";
	size_t p = sizeof(prefix) - 1;
	if (strncmp(s, prefix, p) != 0 || strlen(s + p) != 64)
		return false;
	return strspn(s + p, "0123456789abcdef") == 64;
}

bool label_ok(const char *s, size_t size)
{
	size_t n = strnlen(s, size);
	if (n == size)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x21 || s[i] == 0x7f)
			return false;
	return true;
}

bool label_file_ok(const char *s, size_t size)
{
	return label_ok(s, size) && s[0] && !strchr(s, '/') && strcmp(s, ".") != 0 &&
	       strcmp(s, "..") != 0 && strcmp(s, "-") != 0;
}

bool text_ok(const char *s, size_t size)
{
	size_t n = strnlen(s, size);
	if (n == size)
		return false;
	for (size_t i = 0; i < n; i++)
		if (((unsigned char)s[i] < 0x20 && s[i] != '\t') || s[i] == 0x7f)
			return false;
	return true;
}

bool cgroup_parent_ok(const char *s)
{
	static const char chars[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-";
	size_t n = strnlen(s, CGROUP_PARENT_MAX);
	if (n < 2 || n == CGROUP_PARENT_MAX || s[0] != '/')
		return false;
	/* Each component: a '/', an alphanumeric (so no "//", ".." or trailing '/'), then chars. */
	for (const char *p = s; *p;) {
		if (*p++ != '/' || !is_alnum(*p))
			return false;
		p += strspn(p, chars);
	}
	return true;
}
