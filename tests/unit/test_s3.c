/*
 * The S3 objstore. Always: configuration, and requests against a fake HTTP
 * server in a thread (retries, errors, signing headers, query encoding).
 * With SNAPFS_TEST_S3_ENDPOINT (and SNAPFS_TEST_S3_BUCKET) set, also against
 * a real S3-compatible server; tests/integration/test_s3_objstore.sh runs it
 * so against s3rver. More variables there:
 *   SNAPFS_TEST_S3_OUT       a directory: "cross/blob" is left in the bucket and its
 *                            bytes written to OUT/blob, for the aws CLI to compare
 *   SNAPFS_TEST_S3_AWS_KEY   a key the aws CLI uploaded, with the local copy in
 *   SNAPFS_TEST_S3_AWS_FILE  this file: read back and compared
 *   SNAPFS_TEST_S3_KILL_PID  the server's pid: killed during a large upload, last
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend/objstore/objstore.h"
#include "lib/util.h"
#include "tests/unit/t.h"

#define SECRET "Th1sIsTheS3cr3t"
#define TOKEN "Th1sIsTheT0ken"

static char base[64];

static void set_env(const char *endpoint, const char *secret, const char *token)
{
	/* s3rver's key (its secret is S3RVER too); the fake server takes any. */
	setenv("AWS_ACCESS_KEY_ID", "S3RVER", 1);
	setenv("AWS_SECRET_ACCESS_KEY", secret, 1);
	if (token)
		setenv("AWS_SESSION_TOKEN", token, 1);
	else
		unsetenv("AWS_SESSION_TOKEN");
	if (endpoint)
		setenv("AWS_ENDPOINT_URL", endpoint, 1);
	else
		unsetenv("AWS_ENDPOINT_URL");
	unsetenv("AWS_ENDPOINT_URL_S3");
	unsetenv("AWS_REGION");
	unsetenv("AWS_DEFAULT_REGION");
}

/* No message may hold the secret or the token. */
static bool clean(const struct err *e)
{
	return !strstr(e->msg, SECRET) && !strstr(e->msg, TOKEN);
}

static int open_fails(const char *url)
{
	struct objstore *os = NULL;
	struct err e = {0};
	int rc = objstore_s3_open(url, &os, &e);
	CHECK(clean(&e) && !strstr(e.msg, "key:"));
	objstore_close(os);
	return rc;
}

/* --- configuration ---------------------------------------------------------------- */

static void test_config(void)
{
	struct objstore *os = NULL;
	struct err e = {0};
	set_env("http://127.0.0.1:9000/", SECRET, TOKEN);
	CHECK(objstore_s3_open("s3://bkt/a/b/", &os, &e) == 0);
	CHECK_STR(os ? os->url : NULL, "s3://bkt/a/b at http://127.0.0.1:9000");
	objstore_close(os);
	static const char *const bad[] = {"s3://",	  "s3://ab",
					  "s3://Bucket",  "s3://b_kt",
					  "s3://-bkt",	  "s3://bkt/../x",
					  "s3://bkt//x",  "s3://bkt/a b",
					  "s3://bkt/./x", "s3://key:" SECRET "@bkt/x",
					  "file:///x"};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		CHECK(open_fails(bad[i]) == -EINVAL);

	set_env(NULL, SECRET, NULL);
	setenv("AWS_REGION", "eu-west-1", 1);
	CHECK(objstore_s3_open("s3://bkt", &os, &e) == 0);
	CHECK_STR(os ? os->url : NULL, "s3://bkt at https://s3.eu-west-1.amazonaws.com");
	objstore_close(os);
	setenv("AWS_REGION", "EU WEST", 1);
	CHECK(open_fails("s3://bkt") == -EINVAL);

	static const char *const endpoints[] = {"ftp://host", "http://key:" SECRET "@host",
						"http://", "http://host/path", "https://ho st"};
	for (size_t i = 0; i < ARRAY_SIZE(endpoints); i++) {
		set_env(endpoints[i], SECRET, NULL);
		CHECK(open_fails("s3://bkt") == -EINVAL);
	}
	set_env("http://host", "bad\nsecret" SECRET, NULL);
	CHECK(open_fails("s3://bkt") == -EINVAL);
	unsetenv("AWS_SECRET_ACCESS_KEY");
	CHECK(open_fails("s3://bkt") == -EINVAL);
}

/* --- a fake server ------------------------------------------------------------------- */

struct answer {
	int status;
	const char *body;
};

/* Answers each request with the next of @answers (the last one repeats), then closes. */
struct fake {
	int lfd, port;
	pthread_t thread;
	const struct answer *answers;
	size_t nanswers;
	int requests;
	char head[16384]; /* the last request's line and headers */
};

static int read_head(int fd, char *buf, size_t cap, size_t *len)
{
	*len = 0;
	while (*len + 1 < cap) {
		ssize_t n = read(fd, buf + *len, cap - 1 - *len);
		if (n <= 0)
			return -1;
		*len += (size_t)n;
		buf[*len] = '\0';
		if (strstr(buf, "\r\n\r\n"))
			return 0;
	}
	return -1;
}

static void drain_body(int fd, const char *head, size_t have)
{
	const char *cl = strcasestr(head, "\ncontent-length:");
	long long left = cl ? atoll(cl + strlen("\ncontent-length:")) : 0;
	const char *end = strstr(head, "\r\n\r\n") + 4;
	left -= (long long)(have - (size_t)(end - head));
	if (strcasestr(head, "\nexpect: 100-continue"))
		(void)!write(fd, "HTTP/1.1 100 Continue\r\n\r\n", 25);
	char buf[4096];
	while (left > 0) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n <= 0)
			return;
		left -= n;
	}
}

static void serve_one(struct fake *f, int fd)
{
	char head[sizeof(f->head)], out[8192];
	size_t have;
	if (read_head(fd, head, sizeof(head), &have) < 0)
		return;
	drain_body(fd, head, have);
	size_t i = (size_t)f->requests < f->nanswers ? (size_t)f->requests : f->nanswers - 1;
	const struct answer *a = &f->answers[i];
	memcpy(f->head, head, sizeof(head));
	f->requests++;
	int n = snprintf(out, sizeof(out),
			 "HTTP/1.1 %d X\r\nContent-Length: %zu\r\nETag: \"e%d\"\r\n"
			 "Connection: close\r\n\r\n%s",
			 a->status, strlen(a->body), f->requests, a->body);
	(void)!write(fd, out, (size_t)n);
}

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	for (;;) {
		int fd = accept(f->lfd, NULL, NULL);
		if (fd < 0)
			return NULL; /* shut down */
		serve_one(f, fd);
		close(fd);
	}
}

/* A listening socket on 127.0.0.1 and a free port; -1 on failure. */
static int listen_any(int *port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 16) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	*port = ntohs(sa.sin_port);
	return fd;
}

static struct objstore *fake_start(struct fake *f, const struct answer *answers, size_t n)
{
	char endpoint[64];
	struct objstore *os = NULL;
	struct err e = {0};
	memset(f, 0, sizeof(*f));
	f->answers = answers;
	f->nanswers = n;
	f->lfd = listen_any(&f->port);
	if (f->lfd < 0 || pthread_create(&f->thread, NULL, fake_main, f) != 0)
		abort();
	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d", f->port);
	set_env(endpoint, SECRET, TOKEN);
	if (objstore_s3_open("s3://bkt/pfx", &os, &e) < 0)
		abort();
	return os;
}

static void fake_stop(struct fake *f, struct objstore *os)
{
	objstore_close(os);
	shutdown(f->lfd, SHUT_RDWR);
	pthread_join(f->thread, NULL);
	close(f->lfd);
}

#define ERROR_XML(code, msg) "<Error><Code>" code "</Code><Message>" msg "</Message></Error>"

static void test_retries(void)
{
	struct fake f;
	struct err e = {0};
	char *got = NULL;
	const struct answer flaky[] = {
	    {503, ERROR_XML("SlowDown", "Reduce your rate.")}, {502, ""}, {200, "hello"}};
	struct objstore *os = fake_start(&f, flaky, ARRAY_SIZE(flaky));
	CHECK(objstore_get_buf(os, "a/b", &got, NULL, 100, &e) == 0);
	CHECK(got && !strcmp(got, "hello") && f.requests == 3);
	free(got);
	fake_stop(&f, os);

	const struct answer denied[] = {{403, ERROR_XML("AccessDenied", "Access Denied.")}};
	os = fake_start(&f, denied, 1);
	CHECK(objstore_get_buf(os, "a/b", &got, NULL, 100, &e) == -EIO && f.requests == 1);
	CHECK_STR(e.msg, "cannot get s3://bkt/pfx/a/b: AccessDenied: Access Denied");
	fake_stop(&f, os);

	const struct answer broken[] = {{500, ERROR_XML("InternalError", "Oops &amp; sorry")}};
	os = fake_start(&f, broken, 1);
	CHECK(objstore_put_buf(os, "a/b", "x", 1, &e) == -EIO && f.requests == 5);
	CHECK_STR(e.msg, "cannot put s3://bkt/pfx/a/b: InternalError: Oops & sorry (5 tries)");
	fake_stop(&f, os);

	const struct answer missing[] = {{404, ERROR_XML("NoSuchKey", "The key does not exist.")}};
	os = fake_start(&f, missing, 1);
	CHECK(objstore_get_buf(os, "a/b", &got, NULL, 100, &e) == -ENOENT && f.requests == 1);
	CHECK(e.code == ENOENT && strstr(e.msg, "NoSuchKey"));
	CHECK(objstore_del(os, "a/b", &e) == 0);
	fake_stop(&f, os);
}

/* What is sent: the body's hash, the token, signed headers; never the secret. */
static void test_headers(void)
{
	struct fake f;
	struct err e = {0};
	const struct answer ok[] = {{200, ""}};
	struct objstore *os = fake_start(&f, ok, 1);
	CHECK(objstore_put_buf(os, "a/b.x_y-z", "hello", 5, &e) == 0);
	CHECK(str_has_prefix(f.head, "PUT /bkt/pfx/a/b.x_y-z HTTP/1.1\r\n"));
	CHECK(strcasestr(f.head, "\nx-amz-content-sha256: 2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e"
				 "5c1fa7425e73043362938b9824\r\n"));
	CHECK(strcasestr(f.head, "\nx-amz-security-token: " TOKEN "\r\n"));
	CHECK(strstr(f.head, "Credential=S3RVER/") && strstr(f.head, "/us-east-1/s3/"));
	CHECK(strstr(f.head, "SignedHeaders=content-type;host;x-amz-content-sha256;x-amz-date;"
			     "x-amz-security-token,"));
	CHECK(!strstr(f.head, SECRET));
	fake_stop(&f, os);
}

struct seen {
	int n;
	char keys[4][64];
	int64_t sizes[4];
};

static int on_key(const char *key, int64_t size, void *arg)
{
	struct seen *s = arg;
	if (s->n < 4) {
		snprintf(s->keys[s->n], sizeof(s->keys[0]), "%s", key);
		s->sizes[s->n] = size;
	}
	s->n++;
	return 0;
}

static void test_list_query(void)
{
	struct fake f;
	struct err e = {0};
	struct seen s = {0};
	const struct answer pages[] = {
	    {200, "<ListBucketResult><Contents><Key>pfx/k&amp;1</Key><Size>7</Size></Contents>"
		  "<Contents><Key>elsewhere</Key><Size>1</Size></Contents>"
		  "<IsTruncated>true</IsTruncated>"
		  "<NextContinuationToken>a/b+c=</NextContinuationToken></ListBucketResult>"},
	    {200, "<ListBucketResult><Contents><Key>pfx/z</Key><Size>5368709120</Size>"
		  "</Contents><IsTruncated>false</IsTruncated></ListBucketResult>"}};
	struct objstore *os = fake_start(&f, pages, ARRAY_SIZE(pages));
	CHECK(objstore_list(os, "", on_key, &s, &e) == 0);
	CHECK(s.n == 2 && !strcmp(s.keys[0], "k&1") && s.sizes[0] == 7);
	CHECK(!strcmp(s.keys[1], "z") && s.sizes[1] == 5368709120LL);
	/* Sorted by name, every reserved character upper-case percent-encoded. */
	CHECK(str_has_prefix(f.head, "GET /bkt?continuation-token=a%2Fb%2Bc%3D&list-type=2&"
				     "prefix=pfx%2F HTTP/1.1\r\n"));
	fake_stop(&f, os);

	const struct answer loop[] = {{200, "<L><IsTruncated>true</IsTruncated></L>"}};
	os = fake_start(&f, loop, 1);
	CHECK(objstore_list(os, "", on_key, &s, &e) == -EIO && strstr(e.msg, "continuation"));
	fake_stop(&f, os);
}

static void test_range(void)
{
	struct fake f;
	struct err e = {0};
	char buf[8];
	const struct answer answers[] = {{206, "3456"},
					 {200, "0123"},
					 {206, "89"},
					 {416, ERROR_XML("InvalidRange", "Not satisfiable")}};
	struct objstore *os = fake_start(&f, answers, ARRAY_SIZE(answers));
	CHECK(objstore_get_range(os, "r", 3, 4, buf, &e) == 0 && !memcmp(buf, "3456", 4));
	CHECK(strstr(f.head, "\r\nRange: bytes=3-6\r\n"));
	/* A server may answer a range that starts at 0 with the whole object. */
	CHECK(objstore_get_range(os, "r", 0, 4, buf, &e) == 0 && !memcmp(buf, "0123", 4));
	CHECK(objstore_get_range(os, "r", 8, 3, buf, &e) == -EIO);
	CHECK_STR(e.msg, "object r ends before byte 11");
	CHECK(objstore_get_range(os, "r", 20, 3, buf, &e) == -EIO && strstr(e.msg, "ends before"));
	CHECK(objstore_get_range(os, "r", -1, 3, buf, &e) == -EINVAL);
	CHECK(objstore_get_range(os, "../r", 0, 3, buf, &e) == -EINVAL);
	fake_stop(&f, os);
}

/* Unfinished multipart uploads older than the grace period are aborted. */
static void test_sweep(void)
{
	struct fake f;
	struct err e = {0};
	const struct answer answers[] = {
	    {200, "<ListMultipartUploadsResult><Upload><Key>pfx/old</Key><UploadId>u+1</UploadId>"
		  "<Initiated>2020-01-02T03:04:05.000Z</Initiated></Upload>"
		  "<Upload><Key>pfx/new</Key><UploadId>u2</UploadId>"
		  "<Initiated>2999-01-01T00:00:00.000Z</Initiated></Upload>"
		  "<IsTruncated>false</IsTruncated></ListMultipartUploadsResult>"},
	    {204, ""}};
	struct objstore *os = fake_start(&f, answers, ARRAY_SIZE(answers));
	CHECK(objstore_sweep(os, 3600 * 1000, &e) == 1 && f.requests == 2);
	CHECK(str_has_prefix(f.head, "DELETE /bkt/pfx/old?uploadId=u%2B1 HTTP/1.1\r\n"));
	fake_stop(&f, os);

	const struct answer unsupported[] = {{501, ERROR_XML("NotImplemented", "Not here")}};
	os = fake_start(&f, unsupported, 1);
	CHECK(objstore_sweep(os, 0, &e) == 0 && f.requests == 1);
	CHECK(str_has_prefix(f.head, "GET /bkt?prefix=pfx%2F&uploads= HTTP/1.1\r\n"));
	fake_stop(&f, os);
}

static void test_refused(void)
{
	struct objstore *os = NULL;
	struct err e = {0};
	char endpoint[64], want[128];
	int port;
	close(listen_any(&port)); /* a port nothing listens on */
	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d", port);
	set_env(endpoint, SECRET, NULL);
	CHECK(objstore_s3_open("s3://bkt", &os, &e) == 0);
	int64_t start = mono_ms();
	CHECK(objstore_put_buf(os, "k", "x", 1, &e) == -EIO);
	/* Four waits of at least half of 100, 200, 400, 800 ms. */
	CHECK(mono_ms() - start >= 750);
	snprintf(want, sizeof(want),
		 "cannot put s3://bkt/k: connection refused to 127.0.0.1:%d "
		 "(5 tries)",
		 port);
	CHECK_STR(e.msg, want);
	objstore_close(os);
}

/* --- a real server -------------------------------------------------------------------- */

static char *random_bytes(size_t len)
{
	char *p = malloc(len);
	uint64_t x = 0x9e3779b97f4a7c15ull ^ (uint64_t)now_ms();
	for (size_t i = 0; p && i < len; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		p[i] = (char)x;
	}
	return p;
}

static struct objstore *real_open(const char *bucket, const char *prefix, const char *secret)
{
	char url[256];
	struct objstore *os = NULL;
	struct err e = {0};
	set_env(getenv("SNAPFS_TEST_S3_ENDPOINT"), secret, NULL);
	snprintf(url, sizeof(url), "s3://%s/%s", bucket, prefix);
	CHECK(objstore_s3_open(url, &os, &e) == 0);
	return os;
}

static void real_small(struct objstore *os)
{
	struct err e = {0};
	char *got = NULL;
	size_t len = 1;
	CHECK(objstore_put_buf(os, "small/a", "hello", 5, &e) == 0);
	CHECK(objstore_get_buf(os, "small/a", &got, &len, 5, &e) == 0);
	CHECK(len == 5 && got && !strcmp(got, "hello"));
	free(got);
	CHECK(objstore_get_buf(os, "small/a", &got, &len, 4, &e) == -EFBIG);
	CHECK(objstore_put_buf(os, "small/empty", "", 0, &e) == 0);
	CHECK(objstore_get_buf(os, "small/empty", &got, &len, 4, &e) == 0 && len == 0);
	free(got);
	CHECK(objstore_get_buf(os, "small/none", &got, &len, 4, &e) == -ENOENT);
	CHECK(strstr(e.msg, "NoSuchKey") && strstr(e.msg, "small/none"));
	CHECK(objstore_del(os, "small/a", &e) == 0 && objstore_del(os, "small/a", &e) == 0);
	CHECK(objstore_get_buf(os, "small/a", &got, &len, 4, &e) == -ENOENT);
	CHECK(objstore_del(os, "small/empty", &e) == 0);
}

/* 40 MiB: three parts, sent in parallel; read back whole, to a file and in ranges. */
static void real_multipart(struct objstore *os, const char *key, const char *out_dir)
{
	struct err e = {0};
	size_t len = (40u << 20) + 123;
	char path[PATH_MAX], back[PATH_MAX], *got = NULL, range[64];
	_cleanup_free_ char *data = random_bytes(len);
	snprintf(path, sizeof(path), "%s/%s", out_dir ? out_dir : base, "blob");
	snprintf(back, sizeof(back), "%s/back", base);
	CHECK(write_file_durable(path, data, len) == 0);
	CHECK(objstore_put_file(os, key, path, &e) == 0);
	CHECK(objstore_get_file(os, key, back, &e) == 0);
	size_t got_len = 0;
	CHECK(read_file(back, &got, &got_len, len) == 0);
	CHECK(got_len == len && got && !memcmp(got, data, len));
	free(got);
	CHECK(objstore_put_buf(os, "multi/buf", data, len, &e) == 0);
	CHECK(objstore_get_buf(os, "multi/buf", &got, &got_len, len, &e) == 0);
	CHECK(got_len == len && got && !memcmp(got, data, len));
	free(got);
	int64_t off = (16 << 20) - 10; /* across the first part boundary */
	CHECK(objstore_get_range(os, "multi/buf", off, sizeof(range), range, &e) == 0);
	CHECK(!memcmp(range, data + off, sizeof(range)));
	CHECK(objstore_get_range(os, "multi/buf", (int64_t)len - 4, 8, range, &e) == -EIO);
	CHECK(objstore_get_range(os, "multi/buf", (int64_t)len + 4, 8, range, &e) == -EIO);
	CHECK(objstore_get_range(os, "multi/none", 0, 8, range, &e) == -ENOENT);
	CHECK(objstore_del(os, "multi/buf", &e) == 0);
	unlink(back);
}

static int count_key(const char *key, int64_t size, void *arg)
{
	(void)key;
	(*(int *)arg) += size == 1;
	return 0;
}

static int stop_early(const char *key, int64_t size, void *arg)
{
	(void)key;
	(void)size;
	return ++*(int *)arg == 1500 ? 9 : 0;
}

/* More keys than one listing page holds (1000 on S3 and s3rver). */
static void real_list(struct objstore *os)
{
	enum { KEYS = 2345 };
	struct err e = {0};
	char key[64];
	int ok = 0, n = 0;
	for (int i = 0; i < KEYS; i++) {
		snprintf(key, sizeof(key), "many/k%05d", i);
		ok += objstore_put_buf(os, key, "x", 1, &e) == 0;
	}
	CHECK(ok == KEYS);
	CHECK(objstore_put_buf(os, "manyx", "yy", 2, &e) == 0);
	CHECK(objstore_list(os, "many/", count_key, &n, &e) == 0);
	CHECK(n == KEYS);
	n = 0;
	CHECK(objstore_list(os, "many/", stop_early, &n, &e) == 9 && n == 1500);
	n = 0;
	CHECK(objstore_list(os, "nothing/", count_key, &n, &e) == 0 && n == 0);
	for (int i = 0; i < KEYS; i++) {
		snprintf(key, sizeof(key), "many/k%05d", i);
		ok -= objstore_del(os, key, &e) == 0;
	}
	CHECK(ok == 0);
	CHECK(objstore_list(os, "many/", count_key, &n, &e) == 0 && n == 0);
	CHECK(objstore_del(os, "manyx", &e) == 0);
}

struct worker {
	struct objstore *os;
	int id, ok;
};

/* One of several threads sharing one objstore: its own keys, put, read back, deleted. */
static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct err e = {0};
	char key[64], data[100 << 10], *got = NULL;
	size_t len = 0;
	for (int i = 0; i < 8; i++) {
		snprintf(key, sizeof(key), "threads/%d/%d", w->id, i);
		memset(data, 'a' + (w->id + i) % 26, sizeof(data));
		bool ok = objstore_put_buf(w->os, key, data, sizeof(data), &e) == 0 &&
			  objstore_get_buf(w->os, key, &got, &len, sizeof(data), &e) == 0 &&
			  len == sizeof(data) && !memcmp(got, data, len) &&
			  objstore_del(w->os, key, &e) == 0;
		w->ok += ok;
		if (!ok)
			printf("thread %d, %s: %s\n", w->id, key, e.msg);
		free(got);
		got = NULL;
	}
	return NULL;
}

/*
 * The store's workers call one objstore from several threads at once.
 * threads/keep is there for s3rver: its delete removes the emptied
 * directories above a key, checking each is empty before an rm -r that can
 * take an object another request has put into it meanwhile.
 */
static void real_threads(struct objstore *os)
{
	enum { THREADS = 6 };
	pthread_t t[THREADS];
	struct worker w[THREADS];
	struct err e = {0};
	CHECK(objstore_put_buf(os, "threads/keep", "k", 1, &e) == 0);
	for (int i = 0; i < THREADS; i++) {
		w[i] = (struct worker){.os = os, .id = i};
		CHECK(pthread_create(&t[i], NULL, worker_main, &w[i]) == 0);
	}
	for (int i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		CHECK(w[i].ok == 8);
	}
	CHECK(objstore_del(os, "threads/keep", &e) == 0);
}

static void real_errors(const char *bucket)
{
	struct err e = {0};
	struct objstore *os = real_open(bucket, "t", SECRET);
	CHECK(objstore_put_buf(os, "k", "x", 1, &e) == -EIO);
	CHECK(strstr(e.msg, "SignatureDoesNotMatch") && clean(&e));
	objstore_close(os);
	os = real_open("no-such-bucket-here", "t", "S3RVER");
	CHECK(objstore_list(os, "", count_key, &(int){0}, &e) == -EIO);
	CHECK(strstr(e.msg, "NoSuchBucket") != NULL);
	objstore_close(os);
}

/* Read back what the aws CLI uploaded. */
static void real_from_aws(struct objstore *os, const char *key, const char *file)
{
	struct err e = {0};
	char *want = NULL, *got = NULL;
	size_t want_len = 0, got_len = 0;
	CHECK(read_file(file, &want, &want_len, 1u << 30) == 0);
	CHECK(objstore_get_buf(os, key, &got, &got_len, 1u << 30, &e) == 0);
	CHECK(want && got && want_len == got_len && !memcmp(want, got, want_len));
	free(want);
	free(got);
}

static void *kill_later(void *arg)
{
	struct timespec ts = {.tv_nsec = 300 * 1000000};
	nanosleep(&ts, NULL);
	kill((pid_t)(intptr_t)arg, SIGKILL);
	return NULL;
}

/* The server dies during a 256 MiB upload: retries, then the reason. */
static void real_killed(struct objstore *os, pid_t pid)
{
	struct err e = {0};
	size_t len = 256u << 20;
	_cleanup_free_ char *data = calloc(1, len);
	pthread_t t;
	CHECK(data && pthread_create(&t, NULL, kill_later, (void *)(intptr_t)pid) == 0);
	int rc = objstore_put_buf(os, "killed/big", data, len, &e);
	pthread_join(t, NULL);
	CHECK(rc == -EIO && strstr(e.msg, "killed/big") && strstr(e.msg, "connection refused to"));
	CHECK(strstr(e.msg, "(5 tries)") != NULL);
	printf("after the server was killed: %s\n", e.msg);
}

static void test_real(void)
{
	const char *bucket = getenv("SNAPFS_TEST_S3_BUCKET");
	const char *out = getenv("SNAPFS_TEST_S3_OUT");
	const char *aws_key = getenv("SNAPFS_TEST_S3_AWS_KEY");
	const char *kill_pid = getenv("SNAPFS_TEST_S3_KILL_PID");
	if (!getenv("SNAPFS_TEST_S3_ENDPOINT") || !bucket) {
		printf("skipping the real-server tests: SNAPFS_TEST_S3_ENDPOINT is not set\n");
		return;
	}
	struct objstore *os = real_open(bucket, "", "S3RVER");
	struct err e = {0};
	real_small(os);
	real_multipart(os, out ? "cross/blob" : "multi/file", out);
	if (!out)
		CHECK(objstore_del(os, "multi/file", &e) == 0);
	real_list(os);
	real_threads(os);
	CHECK(objstore_sweep(os, 0, &e) == 0);
	if (aws_key && getenv("SNAPFS_TEST_S3_AWS_FILE"))
		real_from_aws(os, aws_key, getenv("SNAPFS_TEST_S3_AWS_FILE"));
	real_errors(bucket);
	if (kill_pid)
		real_killed(os, (pid_t)atoi(kill_pid));
	objstore_close(os);
}

int main(void)
{
	snprintf(base, sizeof(base), "/tmp/test_s3.XXXXXX");
	if (!mkdtemp(base))
		return 1;
	test_config();
	test_retries();
	test_headers();
	test_list_query();
	test_range();
	test_sweep();
	test_refused();
	test_real();
	rm_rf(base);
	return t_done();
}
