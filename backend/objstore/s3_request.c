/*
 * s3_request.c - s3_request(): one signed request (its URL and headers
 * from s3_sign.c) on a libcurl handle borrowed from the client's pool,
 * tried again while it fails transiently, and its failure as a sentence.
 */
#include "backend/objstore/s3_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "backend/objstore/s3_xml.h"
#include "lib/cancel.h"

/* How much of an error answer we keep to read its <Code> and <Message>. */
#define ERROR_BODY_MAX (64u << 10)
#define CONNECT_TIMEOUT_MS 10000L
/* A transfer slower than this many bytes a second for LOW_SPEED_SECS is a timeout. */
#define LOW_SPEED_BYTES 1024L
#define LOW_SPEED_SECS 30L

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
	if (r->out) {
		strbuf_add(r->out, data, len);
		return strbuf_error(r->out);
	}
	if (r->out_buf) {
		if (len > r->out_cap - (size_t)r->out_len)
			return -EFBIG;
		memcpy(r->out_buf + r->out_len, data, len);
		return 0;
	}
	return r->out_fd < 0 ? 0 : pwrite_all(r->out_fd, data, len, r->out_len);
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

/* libcurl calls it about once a second, answer or not: non-zero ends the transfer. */
static int progress_cb(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	(void)arg, (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
	return cancel_requested();
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
	/* The calling thread may have to give up on a store that does not answer (lib/cancel.h). */
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, progress_cb);
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
		/* Unchecked: one too long for it leaves it empty, answered as a bare status. */
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

#define BACKOFF_SLICE_MS 100

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
	int64_t until = mono_ms() + d / 2 + (int64_t)(rnd % (uint32_t)(d / 2 + 1));
	/* In slices, so a thread told to give up (lib/cancel.h) does not sleep on. */
	for (int64_t now = mono_ms(); now < until && !cancel_requested(); now = mono_ms()) {
		int64_t ms = until - now < BACKOFF_SLICE_MS ? until - now : BACKOFF_SLICE_MS;
		struct timespec ts = {.tv_sec = 0, .tv_nsec = ms * 1000000};
		nanosleep(&ts, NULL);
	}
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
	case CURLE_ABORTED_BY_CALLBACK:
		return err_set(e, EIO, "cannot %s %s: %s did not answer in the time snapfs had%s",
			       r->what, name, c->hostport, after);
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
		if (x.local_rc < 0 || !transient(cc, r->status) || tries == S3_TRIES ||
		    cancel_requested())
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
	int rc = s3_build_url(c, r, &url);
	if (rc < 0) {
		rc = err_set(e, EINVAL, "cannot %s s3://%s/%.*s: the request is too long", r->what,
			     c->bucket, S3_KEY_MAX, r->key ? r->key : "");
		goto out;
	}
	rc = s3_build_headers(c, r, &headers);
	if (rc < 0) {
		rc = local_failure(c, r, -rc, e);
		goto out;
	}
	rc = run(c, r, strbuf_str(&url), headers, e);
out:
	curl_slist_free_all(headers);
	return rc;
}
