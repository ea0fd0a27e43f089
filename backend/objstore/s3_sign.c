/*
 * s3_sign.c - what an S3 request sends, as libcurl's SigV4 signs it: the
 * URL with its query sorted and percent-encoded, the hex SHA-256 of the
 * body, and the headers (docs/s3.md, "Signing").
 */
#include "backend/objstore/s3_internal.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PARAMS_MAX 8
#define HASH_CHUNK (1u << 20)

/* RFC 3986 percent-encoding with upper-case hex, as SigV4 wants; '/' kept in keys. */
static void uri_encode(struct strbuf *sb, const char *s, bool keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		bool plain = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
			     (*p >= '0' && *p <= '9') || strchr("-._~", *p) ||
			     (keep_slash && *p == '/');
		char esc[3] = {'%', hex[*p >> 4], hex[*p & 15]};
		if (plain)
			strbuf_add(sb, p, 1);
		else
			strbuf_add(sb, esc, 3);
	}
}

static int param_cmp(const void *a, const void *b)
{
	const struct s3_param *x = a, *y = b;
	return strcmp(x->name, y->name);
}

/* "?a=1&b=2": sorted by name, as libcurl 7.88 signs the query as given. */
static int add_query(struct strbuf *url, const struct s3_param *params, size_t n)
{
	struct s3_param sorted[PARAMS_MAX];
	if (n > PARAMS_MAX)
		return -E2BIG;
	if (n == 0)
		return strbuf_error(url);
	memcpy(sorted, params, n * sizeof(*params));
	qsort(sorted, n, sizeof(*sorted), param_cmp);
	for (size_t i = 0; i < n; i++) {
		strbuf_adds(url, i == 0 ? "?" : "&");
		uri_encode(url, sorted[i].name, false);
		strbuf_adds(url, "=");
		if (sorted[i].value)
			uri_encode(url, sorted[i].value, false);
	}
	return strbuf_error(url);
}

int s3_build_url(struct s3_client *c, const struct s3_req *r, struct strbuf *url)
{
	strbuf_adds(url, c->base);
	/* Path-style, the bucket is "/bucket", no slash after it (that is what is signed). */
	if (r->key || !c->path_style)
		strbuf_adds(url, "/");
	if (r->key)
		uri_encode(url, r->key, true);
	return add_query(url, r->params, r->nparams);
}

/* Feed @len bytes of @fd from @off to @ctx. */
static int hash_file(EVP_MD_CTX *ctx, int fd, int64_t off, int64_t len)
{
	_cleanup_free_ char *buf = malloc(HASH_CHUNK);
	if (!buf)
		return -ENOMEM;
	for (int64_t done = 0; done < len;) {
		size_t want = len - done < HASH_CHUNK ? (size_t)(len - done) : HASH_CHUNK;
		ssize_t n = pread(fd, buf, want, (off_t)(off + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -ENODATA; /* the file shrank */
		if (!EVP_DigestUpdate(ctx, buf, (size_t)n))
			return -EIO;
		done += n;
	}
	return 0;
}

/* The hex SHA-256 of the request's body, for x-amz-content-sha256. */
static int sha256_hex(const struct s3_req *r, char hex[65])
{
	unsigned char md[32];
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	if (!ctx)
		return -ENOMEM;
	int rc = EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) ? 0 : -EIO;
	if (rc == 0 && r->body_fd >= 0)
		rc = hash_file(ctx, r->body_fd, r->body_off, r->body_len);
	else if (rc == 0 && r->body_len > 0 && !EVP_DigestUpdate(ctx, r->body, (size_t)r->body_len))
		rc = -EIO;
	if (rc == 0 && !EVP_DigestFinal_ex(ctx, md, NULL))
		rc = -EIO;
	EVP_MD_CTX_free(ctx);
	for (size_t i = 0; rc == 0 && i < sizeof(md); i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	return rc;
}

static int add_header(struct curl_slist **list, const char *line)
{
	struct curl_slist *l = curl_slist_append(*list, line);
	if (!l)
		return -ENOMEM;
	*list = l;
	return 0;
}

/* Every header here is signed: libcurl signs all of CURLOPT_HTTPHEADER. */
int s3_build_headers(struct s3_client *c, const struct s3_req *r, struct curl_slist **list)
{
	char hex[65], line[256];
	int rc = sha256_hex(r, hex);
	if (rc < 0)
		return rc;
	snprintf(line, sizeof(line), "x-amz-content-sha256: %s", hex);
	rc = add_header(list, line);
	if (rc == 0 && c->token_header[0])
		rc = add_header(list, c->token_header);
	if (rc == 0 && r->range) {
		rc = xsnprintf(line, sizeof(line), "Range: %s", r->range);
		if (rc >= 0)
			rc = add_header(list, line);
	}
	/* The object's type; without it libcurl would send a form type with a POST. */
	if (rc == 0 && (!strcmp(r->method, "PUT") || !strcmp(r->method, "POST")))
		rc = add_header(list, "Content-Type: application/octet-stream");
	return rc < 0 ? rc : 0;
}
