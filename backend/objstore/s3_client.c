#include "backend/objstore/s3_client.h"

#include <curl/curl.h>
#include <errno.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "backend/objstore/s3_xml.h"

/* Idle handles kept for reuse (each keeps its connections). */
#define POOL_MAX 16
#define BUCKET_MAX 63
#define REGION_MAX 32
#define AUTHORITY_MAX 200
#define ACCESS_KEY_MAX 128
#define SECRET_MAX 256
/* Session tokens run to about 2 KiB; headers in total stay well under libcurl's limits. */
#define TOKEN_MAX 4096
/* How much of an error answer we keep to read its <Code> and <Message>. */
#define ERROR_BODY_MAX (64u << 10)
#define PARAMS_MAX 8
#define HASH_CHUNK (1u << 20)
#define CONNECT_TIMEOUT_MS 10000L
/* A transfer slower than this many bytes a second for LOW_SPEED_SECS is a timeout. */
#define LOW_SPEED_BYTES 1024L
#define LOW_SPEED_SECS 30L

struct s3_client {
	char bucket[BUCKET_MAX + 1];
	char prefix[S3_PREFIX_MAX + 2]; /* "" or "prefix/" */
	char endpoint[AUTHORITY_MAX + 16];
	char base[2 * AUTHORITY_MAX]; /* the URL of the bucket, no trailing '/' */
	bool path_style;
	char hostport[AUTHORITY_MAX + 8]; /* for "connection refused to HOST:PORT" */
	char sigv4[REGION_MAX + 16];
	char access_key[ACCESS_KEY_MAX + 1];
	char secret[SECRET_MAX + 1];
	char token_header[TOKEN_MAX + 32]; /* "x-amz-security-token: ..." or "" */
	char url[1024];
	pthread_mutex_t lock;
	CURL *idle[POOL_MAX];
	size_t nidle;
};

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

/* The objstore key alphabet, with non-empty components that are not "." or "..". */
static bool prefix_ok(const char *p, size_t n)
{
	if (!all_in(p, n, KEY_CHARS) || p[0] == '/')
		return false;
	for (size_t i = 0; i < n;) {
		size_t len = strcspn(p + i, "/");
		len = len > n - i ? n - i : len;
		if (len == 0 || (len == 1 && p[i] == '.') || (len == 2 && !memcmp(p + i, "..", 2)))
			return false;
		i += len + 1;
	}
	return true;
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
	char tok[TOKEN_MAX + 1];
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

/* --- the handle pool ---------------------------------------------------------- */

static CURL *pool_take(struct s3_client *c)
{
	CURL *h = NULL;
	pthread_mutex_lock(&c->lock);
	if (c->nidle > 0)
		h = c->idle[--c->nidle];
	pthread_mutex_unlock(&c->lock);
	if (!h)
		return curl_easy_init();
	/* Options go; live connections and the DNS cache stay. */
	curl_easy_reset(h);
	return h;
}

static void pool_give(struct s3_client *c, CURL *h)
{
	pthread_mutex_lock(&c->lock);
	if (c->nidle < POOL_MAX) {
		c->idle[c->nidle++] = h;
		h = NULL;
	}
	pthread_mutex_unlock(&c->lock);
	if (h)
		curl_easy_cleanup(h);
}

/* --- what a request sends ------------------------------------------------------ */

/* RFC 3986 percent-encoding with upper-case hex, as SigV4 wants; '/' kept in keys. */
static int uri_encode(struct strbuf *sb, const char *s, bool keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	int rc = 0;
	for (const unsigned char *p = (const unsigned char *)s; *p && rc == 0; p++) {
		bool plain = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
			     (*p >= '0' && *p <= '9') || strchr("-._~", *p) ||
			     (keep_slash && *p == '/');
		char esc[3] = {'%', hex[*p >> 4], hex[*p & 15]};
		rc = plain ? strbuf_add(sb, p, 1) : strbuf_add(sb, esc, 3);
	}
	return rc;
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
		return 0;
	memcpy(sorted, params, n * sizeof(*params));
	qsort(sorted, n, sizeof(*sorted), param_cmp);
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		rc = strbuf_adds(url, i == 0 ? "?" : "&");
		if (rc == 0)
			rc = uri_encode(url, sorted[i].name, false);
		if (rc == 0)
			rc = strbuf_adds(url, "=");
		if (rc == 0 && sorted[i].value)
			rc = uri_encode(url, sorted[i].value, false);
	}
	return rc;
}

static int build_url(struct s3_client *c, const struct s3_req *r, struct strbuf *url)
{
	int rc = strbuf_adds(url, c->base);
	/* Path-style, the bucket is "/bucket", no slash after it (that is what is signed). */
	if (rc == 0 && (r->key || !c->path_style))
		rc = strbuf_adds(url, "/");
	if (rc == 0 && r->key)
		rc = uri_encode(url, r->key, true);
	if (rc == 0)
		rc = add_query(url, r->params, r->nparams);
	return rc;
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
static int build_headers(struct s3_client *c, const struct s3_req *r, struct curl_slist **list)
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

/* --- one try --------------------------------------------------------------------- */

/* What the callbacks of one try share. */
struct xfer {
	struct s3_req *r;
	CURL *h;
	int64_t sent;	   /* body bytes handed to libcurl */
	struct strbuf err; /* an error answer's body */
	int local_rc;	   /* why our side (a callback, a reset) stopped the transfer */
};

static size_t read_cb(char *dst, size_t size, size_t nmemb, void *arg)
{
	struct xfer *x = arg;
	const struct s3_req *r = x->r;
	size_t want = size * nmemb;
	if ((int64_t)want > r->body_len - x->sent)
		want = (size_t)(r->body_len - x->sent);
	if (want == 0)
		return 0;
	if (r->body_fd < 0) {
		memcpy(dst, r->body + x->sent, want);
		x->sent += (int64_t)want;
		return want;
	}
	ssize_t n;
	do
		n = pread(r->body_fd, dst, want, (off_t)(r->body_off + x->sent));
	while (n < 0 && errno == EINTR);
	if (n <= 0) {
		x->local_rc = n < 0 ? -errno : -ENODATA;
		return CURL_READFUNC_ABORT;
	}
	x->sent += n;
	return (size_t)n;
}

/* libcurl rewinds the body to resend it on a connection that turned out dead. */
static int seek_cb(void *arg, curl_off_t off, int origin)
{
	struct xfer *x = arg;
	if (origin != SEEK_SET || off < 0 || off > x->r->body_len)
		return CURL_SEEKFUNC_CANTSEEK;
	x->sent = off;
	return CURL_SEEKFUNC_OK;
}

static int sink(struct s3_req *r, const char *data, size_t len)
{
	if (r->out)
		return strbuf_add(r->out, data, len);
	if (r->out_buf) {
		if (len > r->out_cap - (size_t)r->out_len)
			return -EFBIG;
		memcpy(r->out_buf + r->out_len, data, len);
		return 0;
	}
	if (r->out_fd < 0)
		return 0;
	for (size_t done = 0; done < len;) {
		ssize_t n = pwrite(r->out_fd, data + done, len - done, (off_t)(r->out_len + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		done += (size_t)n;
	}
	return 0;
}

static size_t write_cb(char *data, size_t size, size_t nmemb, void *arg)
{
	struct xfer *x = arg;
	size_t len = size * nmemb;
	long status = 0;
	curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &status);
	if (status < 200 || status > 299) {
		/* Only the start of an error answer matters; the rest is dropped. */
		if (x->err.len + len <= ERROR_BODY_MAX)
			strbuf_add(&x->err, data, len);
		return len;
	}
	x->local_rc = sink(x->r, data, len);
	if (x->local_rc < 0)
		return 0;
	x->r->out_len += (int64_t)len;
	return len;
}

static size_t header_cb(char *data, size_t size, size_t nmemb, void *arg)
{
	struct xfer *x = arg;
	size_t len = size * nmemb;
	if (len > 5 && !strncasecmp(data, "etag:", 5)) {
		size_t start = 5 + strspn(data + 5, " \t");
		size_t n = len - start;
		while (n > 0 && strchr(" \t\r\n", data[start + n - 1]))
			n--;
		if (n < sizeof(x->r->etag)) {
			memcpy(x->r->etag, data + start, n);
			x->r->etag[n] = '\0';
		}
	}
	return len;
}

static void set_method(CURL *h, const struct s3_req *r)
{
	bool has_body = !strcmp(r->method, "PUT") || !strcmp(r->method, "POST");
	if (!strcmp(r->method, "PUT")) {
		curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)r->body_len);
	} else if (!strcmp(r->method, "POST")) {
		curl_easy_setopt(h, CURLOPT_POST, 1L);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
	} else if (strcmp(r->method, "GET")) {
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, r->method);
	}
	if (has_body) {
		curl_easy_setopt(h, CURLOPT_READFUNCTION, read_cb);
		curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, seek_cb);
	}
}

static void set_options(struct s3_client *c, struct xfer *x, const char *url,
			struct curl_slist *headers)
{
	CURL *h = x->h;
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, LOW_SPEED_BYTES);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, LOW_SPEED_SECS);
	curl_easy_setopt(h, CURLOPT_AWS_SIGV4, c->sigv4);
	curl_easy_setopt(h, CURLOPT_USERNAME, c->access_key);
	curl_easy_setopt(h, CURLOPT_PASSWORD, c->secret);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(h, CURLOPT_READDATA, x);
	curl_easy_setopt(h, CURLOPT_SEEKDATA, x);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, header_cb);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
	set_method(h, x->r);
}

/* Start a try afresh: the body from its start, the sinks empty. */
static int reset_try(struct xfer *x)
{
	struct s3_req *r = x->r;
	x->sent = 0;
	x->local_rc = 0;
	strbuf_reset(&x->err);
	r->status = 0;
	r->out_len = 0;
	r->etag[0] = '\0';
	r->code[0] = '\0';
	if (r->out)
		strbuf_reset(r->out);
	if (r->out_fd >= 0 && ftruncate(r->out_fd, 0) < 0)
		return -errno;
	return 0;
}

/* A 2xx answer that is an <Error> all the same (CompleteMultipartUpload does this). */
static bool error_in_ok(const struct s3_req *r)
{
	if (!r->xml_answer || !r->out)
		return false;
	struct xml_span doc = {strbuf_str(r->out), r->out->len}, content;
	return xml_next(&doc, "Error", &content);
}

static CURLcode perform(struct xfer *x)
{
	int rc = reset_try(x);
	if (rc < 0) {
		x->local_rc = rc;
		return CURLE_WRITE_ERROR;
	}
	CURLcode cc = curl_easy_perform(x->h);
	curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &x->r->status);
	if (cc == CURLE_OK && x->r->status >= 200 && x->r->status <= 299 && error_in_ok(x->r)) {
		/* Read it as the error it is; S3 sends it only for failures worth a retry. */
		strbuf_reset(&x->err);
		strbuf_add(&x->err, x->r->out->buf, x->r->out->len);
		x->r->status = 500;
	}
	return cc;
}

/* --- retries and errors ---------------------------------------------------------- */

static bool transient(CURLcode cc, long status)
{
	if (status >= 400 && status <= 499)
		return false;
	switch (cc) {
	case CURLE_OK:
		return status >= 500 && status != 501; /* 501 Not Implemented stays so */
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_CONNECT:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
		return true;
	default:
		return false;
	}
}

/* Wait before try @tries + 1: a random time in [d/2, d], d doubling from S3_BACKOFF_MS. */
static void backoff(int tries)
{
	int64_t d = S3_BACKOFF_MS;
	for (int i = 1; i < tries && d < S3_BACKOFF_MAX_MS; i++)
		d *= 2;
	d = d > S3_BACKOFF_MAX_MS ? S3_BACKOFF_MAX_MS : d;
	uint32_t rnd = 0;
	if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != sizeof(rnd))
		rnd = (uint32_t)mono_ms();
	int64_t ms = d / 2 + (int64_t)(rnd % (uint32_t)(d / 2 + 1));
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* "s3://bucket/key" for messages: what was asked for, in the user's terms. */
static void object_name(struct s3_client *c, const struct s3_req *r, char *out, size_t cap)
{
	snprintf(out, cap, "s3://%s%s%.*s", c->bucket, r->key ? "/" : "", S3_KEY_MAX,
		 r->key ? r->key : "");
}

static int connection_failure(struct s3_client *c, struct s3_req *r, CURLcode cc, int tries,
			      struct err *e)
{
	char name[S3_KEY_MAX + 80], after[32] = "";
	object_name(c, r, name, sizeof(name));
	if (tries > 1)
		snprintf(after, sizeof(after), " (%d tries)", tries);
	switch (cc) {
	case CURLE_COULDNT_CONNECT:
		return err_set(e, EIO, "cannot %s %s: connection refused to %s%s", r->what, name,
			       c->hostport, after);
	case CURLE_OPERATION_TIMEDOUT:
		return err_set(e, EIO, "cannot %s %s: timed out talking to %s%s", r->what, name,
			       c->hostport, after);
	default:
		return err_set(e, EIO, "cannot %s %s: %s (%s)%s", r->what, name,
			       curl_easy_strerror(cc), c->hostport, after);
	}
}

/* A failure the sink or the body's file caused: not the server's. */
static int local_failure(struct s3_client *c, struct s3_req *r, int code, struct err *e)
{
	char name[S3_KEY_MAX + 80];
	object_name(c, r, name, sizeof(name));
	if (code == EFBIG)
		return err_set(e, EFBIG, "cannot %s %s: the answer is larger than %zu bytes",
			       r->what, name,
			       r->out ? (r->out->max ? r->out->max : STRBUF_MAX) : r->out_cap);
	return err_set(e, code == ENOSPC ? ENOSPC : EIO, "cannot %s %s: %s", r->what, name,
		       strerror(code));
}

/* An HTTP error answer: S3's <Code> and <Message>, or the bare status. */
static int answer_failure(struct s3_client *c, struct s3_req *r, const struct strbuf *body,
			  int tries, struct err *e)
{
	char name[S3_KEY_MAX + 80], msg[512] = "", after[32] = "";
	struct xml_span doc = {strbuf_str(body), body->len}, error;
	object_name(c, r, name, sizeof(name));
	if (xml_next(&doc, "Error", &error)) {
		if (xml_text(error, "Code", r->code, sizeof(r->code)) < 0)
			r->code[0] = '\0';
		if (xml_text(error, "Message", msg, sizeof(msg)) < 0)
			msg[0] = '\0';
	}
	size_t mlen = strlen(msg);
	while (mlen > 0 && msg[mlen - 1] == '.') /* messages carry no full stop */
		msg[--mlen] = '\0';
	if (tries > 1)
		snprintf(after, sizeof(after), " (%d tries)", tries);
	bool missing = r->status == 404 && (!r->code[0] || !strcmp(r->code, "NoSuchKey"));
	if (!r->code[0])
		return err_set(e, missing ? ENOENT : EIO, "cannot %s %s: HTTP status %ld%s",
			       r->what, name, r->status, after);
	return err_set(e, missing ? ENOENT : EIO, "cannot %s %s: %s%s%s%s", r->what, name, r->code,
		       msg[0] ? ": " : "", msg, after);
}

static int outcome(struct s3_client *c, struct xfer *x, CURLcode cc, int tries, struct err *e)
{
	struct s3_req *r = x->r;
	if (x->local_rc < 0)
		return local_failure(c, r, -x->local_rc, e);
	if (r->status >= 200 && r->status <= 299 && cc == CURLE_OK)
		return 0;
	/* An answer counts even where the connection broke after it (a refused upload). */
	if (r->status >= 300)
		return answer_failure(c, r, &x->err, tries, e);
	return connection_failure(c, r, cc, tries, e);
}

static int run(struct s3_client *c, struct s3_req *r, const char *url, struct curl_slist *headers,
	       struct err *e)
{
	struct xfer x = {.r = r, .err = {.max = ERROR_BODY_MAX}};
	x.h = pool_take(c);
	if (!x.h)
		return err_set(e, ENOMEM, "cannot create a libcurl handle");
	set_options(c, &x, url, headers);
	CURLcode cc;
	int tries = 0;
	for (;;) {
		cc = perform(&x);
		tries++;
		if (x.local_rc < 0 || !transient(cc, r->status) || tries == S3_TRIES)
			break;
		debug("S3 %s %s: try %d failed (%s, HTTP %ld); retrying", r->method,
		      r->key ? r->key : c->bucket, tries, curl_easy_strerror(cc), r->status);
		backoff(tries);
	}
	int rc = outcome(c, &x, cc, tries, e);
	strbuf_release(&x.err);
	pool_give(c, x.h);
	return rc;
}

int s3_request(struct s3_client *c, struct s3_req *r, struct err *e)
{
	_cleanup_strbuf_ struct strbuf url = {.max = 4 * S3_KEY_MAX};
	struct curl_slist *headers = NULL;
	int rc = build_url(c, r, &url);
	if (rc < 0) {
		rc = err_set(e, EINVAL, "cannot %s s3://%s/%.*s: the request is too long", r->what,
			     c->bucket, S3_KEY_MAX, r->key ? r->key : "");
		goto out;
	}
	rc = build_headers(c, r, &headers);
	if (rc < 0) {
		rc = local_failure(c, r, -rc, e);
		goto out;
	}
	rc = run(c, r, strbuf_str(&url), headers, e);
out:
	curl_slist_free_all(headers);
	return rc;
}
