/*
 * s3_client.c - the client of one bucket (s3_client.h): s3://bucket/prefix
 * and the environment read once at open, and what the client shows of
 * itself. Requests are in s3_request.c, what they sign in s3_sign.c.
 */
#include "backend/objstore/s3_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* --- configuration ---------------------------------------------------------- */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static const char *env(const char *name)
{
	const char *v = getenv(name);
	return v && v[0] ? v : NULL;
}

static bool all_in(const char *s, size_t n, const char *set)
{
	for (size_t i = 0; i < n; i++) {
		if (!s[i] || !strchr(set, s[i]))
			return false;
	}
	return true;
}

#define LOWER_DIGITS "abcdefghijklmnopqrstuvwxyz0123456789"
#define KEY_CHARS LOWER_DIGITS "ABCDEFGHIJKLMNOPQRSTUVWXYZ._-/"

/* S3's rules, less the legacy upper-case names: 3 to 63 of a-z 0-9 . -, alphanumeric ends. */
static bool bucket_ok(const char *b, size_t n)
{
	return n >= 3 && n <= BUCKET_MAX && all_in(b, n, LOWER_DIGITS ".-") &&
	       strchr(LOWER_DIGITS, b[0]) && strchr(LOWER_DIGITS, b[n - 1]);
}

/* The prefix of every key: itself a key as objstore_key_ok() has them. */
static bool prefix_ok(const char *p, size_t n)
{
	char prefix[S3_PREFIX_MAX + 1];
	if (n >= sizeof(prefix))
		return false;
	memcpy(prefix, p, n);
	prefix[n] = '\0';
	return objstore_key_ok(prefix);
}

static int parse_url(struct s3_client *c, const char *url, struct err *e)
{
	if (!str_has_prefix(url, "s3://"))
		return err_set(e, EINVAL, "an S3 store URL is s3://bucket/prefix");
	const char *b = url + strlen("s3://");
	size_t blen = strcspn(b, "/");
	/* Not echoed: s3://key:secret@bucket must not reach a log. */
	if (!bucket_ok(b, blen))
		return err_set(e, EINVAL, "invalid S3 bucket name: 3 to 63 of a-z 0-9 . -");
	memcpy(c->bucket, b, blen);
	c->bucket[blen] = '\0';
	const char *p = b[blen] == '/' ? b + blen + 1 : b + blen;
	size_t plen = strlen(p);
	while (plen > 0 && p[plen - 1] == '/')
		plen--;
	if (plen > S3_PREFIX_MAX || (plen > 0 && !prefix_ok(p, plen)))
		return err_set(e, EINVAL,
			       "invalid prefix in the S3 store URL: at most %d of "
			       "A-Z a-z 0-9 . _ - / in non-empty components",
			       S3_PREFIX_MAX);
	if (plen > 0)
		snprintf(c->prefix, sizeof(c->prefix), "%.*s/", (int)plen, p);
	return 0;
}

static int parse_region(struct s3_client *c, char region[REGION_MAX + 1], struct err *e)
{
	const char *r = env("AWS_REGION");
	if (!r)
		r = env("AWS_DEFAULT_REGION");
	if (!r)
		r = "us-east-1";
	size_t n = strlen(r);
	if (n > REGION_MAX || !all_in(r, n, LOWER_DIGITS "-"))
		return err_set(e, EINVAL, "invalid AWS_REGION \"%.*s\"", REGION_MAX, r);
	memcpy(region, r, n + 1);
	snprintf(c->sigv4, sizeof(c->sigv4), "aws:amz:%s:s3", region);
	return 0;
}

/* Where no endpoint is set: AWS itself, virtual-hosted unless a dot in the name breaks TLS. */
static void aws_endpoint(struct s3_client *c, const char *region)
{
	snprintf(c->endpoint, sizeof(c->endpoint), "https://s3.%s.amazonaws.com", region);
	c->path_style = strchr(c->bucket, '.') != NULL;
	if (c->path_style) {
		snprintf(c->base, sizeof(c->base), "%s/%s", c->endpoint, c->bucket);
		snprintf(c->hostport, sizeof(c->hostport), "s3.%s.amazonaws.com:443", region);
	} else {
		snprintf(c->base, sizeof(c->base), "https://%s.s3.%s.amazonaws.com", c->bucket,
			 region);
		snprintf(c->hostport, sizeof(c->hostport), "%s.s3.%s.amazonaws.com:443", c->bucket,
			 region);
	}
}

/* AWS_ENDPOINT_URL: http(s)://host[:port][/], addressed path-style. */
static int parse_endpoint(struct s3_client *c, const char *region, struct err *e)
{
	const char *ep = env("AWS_ENDPOINT_URL_S3");
	if (!ep)
		ep = env("AWS_ENDPOINT_URL");
	if (!ep) {
		aws_endpoint(c, region);
		return 0;
	}
	bool https = str_has_prefix(ep, "https://");
	const char *auth = ep + (https ? strlen("https://") : strlen("http://"));
	size_t alen = strcspn(auth, "/");
	/* Not echoed: user:password@host must not reach a log. */
	if ((!https && !str_has_prefix(ep, "http://")) || alen == 0 || alen > AUTHORITY_MAX ||
	    !all_in(auth, alen, KEY_CHARS ":[]") || strspn(auth + alen, "/") != strlen(auth + alen))
		return err_set(e, EINVAL,
			       "AWS_ENDPOINT_URL must be http://host[:port] or "
			       "https://host[:port]");
	snprintf(c->endpoint, sizeof(c->endpoint), "%s%.*s", https ? "https://" : "http://",
		 (int)alen, auth);
	snprintf(c->base, sizeof(c->base), "%s/%s", c->endpoint, c->bucket);
	c->path_style = true;
	const char *colon = memrchr(auth, ':', alen);
	const char *bracket = memrchr(auth, ']', alen);
	bool has_port = colon && (!bracket || colon > bracket);
	snprintf(c->hostport, sizeof(c->hostport), "%.*s%s", (int)alen, auth,
		 has_port ? ""
		 : https  ? ":443"
			  : ":80");
	return 0;
}

/* Copy one credential; never echoed, not even in part. */
static int credential(const char *name, const char *v, char *out, size_t cap, struct err *e)
{
	size_t n = strlen(v);
	for (size_t i = 0; i < n; i++) {
		if (v[i] < 0x21 || v[i] > 0x7e)
			return err_set(e, EINVAL, "%s holds a character that is not printable",
				       name);
	}
	if (n >= cap)
		return err_set(e, EINVAL, "%s is longer than %zu bytes", name, cap - 1);
	memcpy(out, v, n + 1);
	return 0;
}

static int parse_credentials(struct s3_client *c, struct err *e)
{
	const char *id = env("AWS_ACCESS_KEY_ID"), *secret = env("AWS_SECRET_ACCESS_KEY");
	const char *token = env("AWS_SESSION_TOKEN");
	char tok[S3_SESSION_TOKEN_MAX + 1];
	if (!id || !secret)
		return err_set(e, EINVAL,
			       "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set "
			       "for an S3 store");
	int rc = credential("AWS_ACCESS_KEY_ID", id, c->access_key, sizeof(c->access_key), e);
	if (rc == 0)
		rc = credential("AWS_SECRET_ACCESS_KEY", secret, c->secret, sizeof(c->secret), e);
	if (rc == 0 && token)
		rc = credential("AWS_SESSION_TOKEN", token, tok, sizeof(tok), e);
	if (rc == 0 && token)
		snprintf(c->token_header, sizeof(c->token_header), "x-amz-security-token: %s", tok);
	explicit_bzero(tok, sizeof(tok));
	return rc;
}

int s3_client_open(const char *url, struct s3_client **out, struct err *e)
{
	char region[REGION_MAX + 1];
	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK)
		return err_set(e, EIO, "cannot initialise libcurl: %s",
			       curl_easy_strerror(curl_init_rc));
	struct s3_client *c = calloc(1, sizeof(*c));
	if (!c)
		return err_set(e, ENOMEM, "out of memory");
	int rc = parse_url(c, url, e);
	if (rc == 0)
		rc = parse_region(c, region, e);
	if (rc == 0)
		rc = parse_endpoint(c, region, e);
	if (rc == 0)
		rc = parse_credentials(c, e);
	if (rc < 0) {
		explicit_bzero(c, sizeof(*c));
		free(c);
		return rc;
	}
	snprintf(c->url, sizeof(c->url), "s3://%s%s%.*s at %s", c->bucket, c->prefix[0] ? "/" : "",
		 c->prefix[0] ? (int)strlen(c->prefix) - 1 : 0, c->prefix, c->endpoint);
	pthread_mutex_init(&c->lock, NULL);
	*out = c;
	return 0;
}

void s3_client_close(struct s3_client *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nidle; i++)
		curl_easy_cleanup(c->idle[i]);
	pthread_mutex_destroy(&c->lock);
	explicit_bzero(c, sizeof(*c));
	free(c);
}

const char *s3_client_url(const struct s3_client *c)
{
	return c->url;
}

const char *s3_client_prefix(const struct s3_client *c)
{
	return c->prefix;
}
