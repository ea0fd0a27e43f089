#include "backend/objstore/objstore.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend/objstore/s3_client.h"
#include "backend/objstore/s3_xml.h"
#include "lib/cancel.h"
#include "lib/strbuf.h"

/* Objects up to this size go in one PUT; larger ones in parts of at least this size. */
#define SINGLE_PUT_MAX (16 << 20)
#define PART_SIZE (16 << 20)
/* S3's limit on parts per upload. */
#define PARTS_MAX 10000
/* Parts of one object in flight at once, each on its own connection. */
#define UPLOAD_THREADS 4
#define UPLOAD_ID_MAX 1024
/* A listing's continuation token (NextContinuationToken). */
#define LIST_TOKEN_MAX 1024
/* A listing page (1000 keys of up to 1 KiB) or another XML answer. */
#define XML_ANSWER_MAX (8u << 20)

struct s3_store {
	struct objstore os; /* first: the ops get a struct objstore * */
	struct s3_client *c;
};

static struct s3_client *client(struct objstore *os)
{
	return ((struct s3_store *)os)->c;
}

/* The key in the bucket: the store's prefix, then @key. */
static int full_key(struct objstore *os, const char *key, char out[S3_KEY_MAX], struct err *e)
{
	if (!objstore_key_ok(key))
		return err_set(e, EINVAL, "invalid object key \"%.*s\"", OBJ_KEY_MAX, key);
	if (xsnprintf(out, S3_KEY_MAX, "%s%s", s3_client_prefix(client(os)), key) < 0)
		return err_set(e, EINVAL, "object key %s is too long", key);
	return 0;
}

/* --- put ------------------------------------------------------------------------- */

static void set_body(struct s3_req *r, const struct objstore_source *src, int64_t off, int64_t len)
{
	r->body = src->fd < 0 ? src->data + off : NULL;
	r->body_fd = src->fd;
	r->body_off = off;
	r->body_len = len;
}

static int put_single(struct objstore *os, const char *key, const struct objstore_source *src,
		      struct err *e)
{
	struct s3_req r = s3_req_make("put", "PUT", key);
	set_body(&r, src, 0, src->len);
	return s3_request(client(os), &r, e);
}

/* One multipart upload; its parts are shared out among UPLOAD_THREADS threads. */
struct upload {
	struct s3_client *c;
	const char *key;
	char id[UPLOAD_ID_MAX];
	const struct objstore_source *src;
	int64_t part_size;
	int nparts;
	char (*etags)[S3_ETAG_MAX];
	pthread_mutex_t lock;
	int next; /* the next part to send, from 0 */
	int rc;	  /* the first failure, which stops the others */
	struct err err;
	struct cancel *cancel; /* the caller's token (lib/cancel.h): its helpers bind it */
};

static int create_upload(struct upload *u, struct err *e)
{
	_cleanup_strbuf_ struct strbuf out = {.max = XML_ANSWER_MAX};
	const struct s3_param params[] = {{"uploads", NULL}};
	struct s3_req r = s3_req_make("start an upload of", "POST", u->key);
	r.params = params;
	r.nparams = ARRAY_SIZE(params);
	r.out = &out;
	int rc = s3_request(u->c, &r, e);
	if (rc < 0)
		return rc;
	struct xml_span doc = {strbuf_str(&out), out.len};
	if (xml_text(doc, "UploadId", u->id, sizeof(u->id)) <= 0)
		return err_set(e, EIO, "cannot start an upload of %s: no UploadId in the answer",
			       u->key);
	return 0;
}

static int upload_part(struct upload *u, int part, struct err *e)
{
	char number[16];
	snprintf(number, sizeof(number), "%d", part + 1);
	const struct s3_param params[] = {{"partNumber", number}, {"uploadId", u->id}};
	struct s3_req r = s3_req_make("upload a part of", "PUT", u->key);
	r.params = params;
	r.nparams = ARRAY_SIZE(params);
	int64_t off = (int64_t)part * u->part_size;
	set_body(&r, u->src, off,
		 u->src->len - off < u->part_size ? u->src->len - off : u->part_size);
	int rc = s3_request(u->c, &r, e);
	if (rc < 0)
		return rc;
	/* The ETag goes back into XML: refuse what would need escaping there. */
	if (!r.etag[0] || strpbrk(r.etag, "<>&"))
		return err_set(e, EIO, "cannot upload part %d of %s: no usable ETag in the answer",
			       part + 1, u->key);
	memcpy(u->etags[part], r.etag, sizeof(r.etag));
	return 0;
}

/* The next part to send, or -1 when all are taken or one failed. */
static int take_part(struct upload *u)
{
	pthread_mutex_lock(&u->lock);
	int part = u->rc == 0 && u->next < u->nparts ? u->next++ : -1;
	pthread_mutex_unlock(&u->lock);
	return part;
}

static void *upload_worker(void *arg)
{
	struct upload *u = arg;
	for (int part = take_part(u); part >= 0; part = take_part(u)) {
		struct err e = {0};
		int rc = upload_part(u, part, &e);
		if (rc == 0)
			continue;
		pthread_mutex_lock(&u->lock);
		if (u->rc == 0) {
			u->rc = rc;
			u->err = e;
		}
		pthread_mutex_unlock(&u->lock);
	}
	return NULL;
}

static void *upload_thread(void *arg)
{
	struct upload *u = arg;
	cancel_bind(u->cancel);
	return upload_worker(u);
}

/* Send every part: this thread and up to UPLOAD_THREADS - 1 more. */
static int upload_parts(struct upload *u, struct err *e)
{
	pthread_t threads[UPLOAD_THREADS - 1];
	int started = 0;
	u->cancel = cancel_current();
	while (started < UPLOAD_THREADS - 1 && started < u->nparts - 1 &&
	       pthread_create(&threads[started], NULL, upload_thread, u) == 0)
		started++;
	upload_worker(u);
	for (int i = 0; i < started; i++)
		pthread_join(threads[i], NULL);
	if (u->rc < 0 && e)
		*e = u->err;
	return u->rc;
}

static int complete_upload(struct upload *u, struct err *e)
{
	_cleanup_strbuf_ struct strbuf body = {.max = (size_t)u->nparts * (S3_ETAG_MAX + 64) + 128};
	_cleanup_strbuf_ struct strbuf out = {.max = XML_ANSWER_MAX};
	strbuf_adds(&body, "<CompleteMultipartUpload>");
	for (int i = 0; i < u->nparts; i++)
		strbuf_addf(&body, "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>", i + 1,
			    u->etags[i]);
	strbuf_adds(&body, "</CompleteMultipartUpload>");
	int rc = strbuf_error(&body);
	if (rc < 0)
		return err_set(e, -rc, "cannot complete the upload of %s: %s", u->key,
			       strerror(-rc));
	const struct s3_param params[] = {{"uploadId", u->id}};
	struct s3_req r = s3_req_make("complete the upload of", "POST", u->key);
	r.params = params;
	r.nparams = ARRAY_SIZE(params);
	r.body = body.buf;
	r.body_len = (int64_t)body.len;
	r.out = &out;
	r.xml_answer = true;
	return s3_request(u->c, &r, e);
}

/* Best effort: what an abort leaves, objstore_sweep() or a lifecycle rule removes. */
static void abort_upload(struct s3_client *c, const char *key, const char *id)
{
	struct err e = {0};
	const struct s3_param params[] = {{"uploadId", id}};
	struct s3_req r = s3_req_make("abort the upload of", "DELETE", key);
	r.params = params;
	r.nparams = ARRAY_SIZE(params);
	if (s3_request(c, &r, &e) < 0)
		warning("%s", e.msg);
}

/* At least PART_SIZE, in whole MiB, and few enough parts for S3. */
static int64_t part_size_for(int64_t len)
{
	int64_t size = (len + PARTS_MAX - 1) / PARTS_MAX;
	size = (size + (1 << 20) - 1) & ~(int64_t)((1 << 20) - 1);
	return size < PART_SIZE ? PART_SIZE : size;
}

static int put_multipart(struct objstore *os, const char *key, const struct objstore_source *src,
			 struct err *e)
{
	struct upload u = {.c = client(os), .key = key, .src = src};
	u.part_size = part_size_for(src->len);
	u.nparts = (int)((src->len + u.part_size - 1) / u.part_size);
	u.etags = calloc((size_t)u.nparts, sizeof(*u.etags));
	if (!u.etags)
		return err_set(e, ENOMEM, "out of memory");
	pthread_mutex_init(&u.lock, NULL);
	int rc = create_upload(&u, e);
	if (rc < 0)
		goto out;
	rc = upload_parts(&u, e);
	if (rc == 0)
		rc = complete_upload(&u, e);
	if (rc < 0)
		abort_upload(u.c, key, u.id);
out:
	pthread_mutex_destroy(&u.lock);
	free(u.etags);
	return rc;
}

static int put_source(struct objstore *os, const char *key, const struct objstore_source *src,
		      struct err *e)
{
	char fkey[S3_KEY_MAX];
	int rc = full_key(os, key, fkey, e);
	if (rc < 0)
		return rc;
	if (src->len <= SINGLE_PUT_MAX)
		return put_single(os, fkey, src, e);
	return put_multipart(os, fkey, src, e);
}

static int s3_put_buf(struct objstore *os, const char *key, const void *data, size_t len,
		      struct err *e)
{
	struct objstore_source src = {.data = data, .fd = -1, .len = (int64_t)len};
	return put_source(os, key, &src, e);
}

static int s3_put_file(struct objstore *os, const char *key, const char *path, struct err *e)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return err_set(e, EIO, "cannot open %s: %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return err_set(e, EIO, "cannot store %s: not a regular file", path);
	struct objstore_source src = {.fd = fd, .len = st.st_size};
	return put_source(os, key, &src, e);
}

/* --- get ------------------------------------------------------------------------- */

static int s3_get_buf(struct objstore *os, const char *key, char **out, size_t *len, size_t max,
		      struct err *e)
{
	char fkey[S3_KEY_MAX];
	int rc = full_key(os, key, fkey, e);
	if (rc < 0)
		return rc;
	/* A strbuf's max of 0 means its default: one byte is the least we can ask for. */
	_cleanup_strbuf_ struct strbuf sb = {.max = max ? max : 1};
	struct s3_req r = s3_req_make("get", "GET", fkey);
	r.out = &sb;
	rc = s3_request(client(os), &r, e);
	if (rc == -EFBIG || (rc == 0 && sb.len > max))
		return err_set(e, EFBIG, "object %s is larger than %zu bytes", key, max);
	if (rc < 0)
		return rc;
	*out = strbuf_detach(&sb, len);
	return *out ? 0 : err_set(e, ENOMEM, "out of memory");
}

/* Download into a struct durable_file (lib/util.h): a temp file next to @path, renamed over it. */
static int s3_get_file(struct objstore *os, const char *key, const char *path, struct err *e)
{
	char fkey[S3_KEY_MAX];
	struct durable_file d;
	int rc = full_key(os, key, fkey, e);
	if (rc < 0)
		return rc;
	rc = durable_open(&d, path);
	if (rc < 0)
		return objstore_durable_fail(e, rc, &d, EIO);
	struct s3_req r = s3_req_make("get", "GET", fkey);
	r.out_fd = d.fd;
	int got = s3_request(client(os), &r, e);
	rc = durable_end(&d, got);
	/* A failed request said why itself. */
	return rc < 0 && got == 0 ? objstore_durable_fail(e, rc, &d, EIO) : rc;
}

static int s3_get_range(struct objstore *os, const char *key, int64_t off, size_t len, void *buf,
			struct err *e)
{
	char fkey[S3_KEY_MAX], range[64];
	int rc = full_key(os, key, fkey, e);
	if (rc < 0)
		return rc;
	if (off < 0 || (int64_t)len < 0 || off > INT64_MAX - (int64_t)len)
		return err_set(e, EINVAL, "invalid range in object %s", key);
	/* HTTP cannot ask for no bytes. */
	if (len == 0)
		return 0;
	snprintf(range, sizeof(range), "bytes=%lld-%lld", (long long)off,
		 (long long)(off + (int64_t)len - 1));
	struct s3_req r = s3_req_make("get", "GET", fkey);
	r.range = range;
	r.out_buf = buf;
	r.out_cap = len;
	struct err inner = {0};
	rc = s3_request(client(os), &r, &inner);
	bool whole = r.status == 200 && off == 0; /* a server may answer the whole object */
	bool short_read = rc == 0 && r.out_len < (int64_t)len;
	if (r.status == 416 || short_read || (rc == -EFBIG && whole))
		return err_set(e, EIO, "object %s ends before byte %lld", key,
			       (long long)(off + (int64_t)len));
	if (rc == 0 && r.status != 206 && !whole)
		return err_set(e, EIO, "cannot get part of %s: the server ignored the range", key);
	if (rc < 0 && e)
		*e = inner;
	return rc;
}

/* --- del, list, sweep ------------------------------------------------------------ */

static int s3_del(struct objstore *os, const char *key, struct err *e)
{
	char fkey[S3_KEY_MAX];
	int rc = full_key(os, key, fkey, e);
	if (rc < 0)
		return rc;
	struct s3_req r = s3_req_make("delete", "DELETE", fkey);
	rc = s3_request(client(os), &r, e);
	return rc == -ENOENT ? 0 : rc;
}

/* Hand each <Contents> of one page to @fn, the store's prefix taken off. */
static int list_page(struct objstore *os, struct xml_span doc,
		     int (*fn)(const char *key, int64_t size, void *arg), void *arg, struct err *e)
{
	const char *prefix = s3_client_prefix(client(os));
	size_t plen = strlen(prefix);
	char key[S3_KEY_MAX + 1];
	struct xml_span item;
	while (xml_next(&doc, "Contents", &item)) {
		int64_t size;
		if (xml_text(item, "Key", key, sizeof(key)) < 0 ||
		    xml_int64(item, "Size", &size) < 0)
			return err_set(e, EIO,
				       "cannot list %s: a malformed <Contents> in the answer",
				       os->url);
		/* Keys the objstore could not have written are not its objects. */
		if (!str_has_prefix(key, prefix) || strlen(key) - plen >= OBJ_KEY_MAX)
			continue;
		int rc = fn(key + plen, size, arg);
		if (rc != 0)
			return rc;
	}
	return 0;
}

/* The token of the next page into @token, or "" at the end. */
static int next_token(struct objstore *os, struct xml_span doc, char token[LIST_TOKEN_MAX],
		      struct err *e)
{
	char truncated[8] = "";
	char old[LIST_TOKEN_MAX];
	memcpy(old, token, LIST_TOKEN_MAX);
	token[0] = '\0';
	if (xml_text(doc, "IsTruncated", truncated, sizeof(truncated)) < 0 ||
	    strcmp(truncated, "true"))
		return 0;
	if (xml_text(doc, "NextContinuationToken", token, LIST_TOKEN_MAX) <= 0 ||
	    !strcmp(old, token))
		return err_set(e, EIO,
			       "cannot list %s: a cut listing without a new "
			       "continuation token",
			       os->url);
	return 0;
}

static int s3_list(struct objstore *os, const char *prefix,
		   int (*fn)(const char *key, int64_t size, void *arg), void *arg, struct err *e)
{
	char full[S3_KEY_MAX], token[LIST_TOKEN_MAX] = "";
	_cleanup_strbuf_ struct strbuf out = {.max = XML_ANSWER_MAX};
	if (xsnprintf(full, sizeof(full), "%s%s", s3_client_prefix(client(os)), prefix) < 0)
		return 0; /* no key is that long */
	int rc = 0;
	do {
		const struct s3_param params[] = {
		    {"list-type", "2"}, {"prefix", full}, {"continuation-token", token}};
		struct s3_req r = s3_req_make("list", "GET", NULL);
		r.params = params;
		r.nparams = token[0] ? 3 : 2; /* no continuation-token the first time */
		r.out = &out;
		rc = s3_request(client(os), &r, e);
		struct xml_span doc = {strbuf_str(&out), out.len};
		if (rc == 0)
			rc = list_page(os, doc, fn, arg, e);
		if (rc == 0)
			rc = next_token(os, doc, token, e);
	} while (rc == 0 && token[0]);
	return rc;
}

/* "2026-11-29T10:32:12.000Z" in ms since the epoch, or -1. */
static int64_t parse_time(const char *s)
{
	struct tm tm = {0};
	const char *rest = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!rest)
		return -1;
	time_t t = timegm(&tm);
	return t < 0 ? -1 : (int64_t)t * 1000;
}

struct sweep {
	struct objstore *os;
	int64_t cutoff_ms;
	int count;
	char key_marker[S3_KEY_MAX + 1];
	char id_marker[UPLOAD_ID_MAX];
};

/* Abort the uploads of one ListMultipartUploads page started before the cutoff. */
static int sweep_page(struct sweep *s, struct xml_span doc, struct err *e)
{
	struct xml_span item;
	char key[S3_KEY_MAX + 1], id[UPLOAD_ID_MAX], when[64];
	while (xml_next(&doc, "Upload", &item)) {
		if (xml_text(item, "Key", key, sizeof(key)) < 0 ||
		    xml_text(item, "UploadId", id, sizeof(id)) <= 0 ||
		    xml_text(item, "Initiated", when, sizeof(when)) < 0)
			return err_set(e, EIO, "cannot list uploads in %s: a malformed <Upload>",
				       s->os->url);
		int64_t started = parse_time(when);
		if (started < 0 || started > s->cutoff_ms)
			continue;
		abort_upload(client(s->os), key, id);
		s->count++;
	}
	return 0;
}

static int sweep_next(struct sweep *s, struct xml_span doc)
{
	char truncated[8] = "";
	if (xml_text(doc, "IsTruncated", truncated, sizeof(truncated)) < 0 ||
	    strcmp(truncated, "true"))
		return 0;
	if (xml_text(doc, "NextKeyMarker", s->key_marker, sizeof(s->key_marker)) < 0 ||
	    xml_text(doc, "NextUploadIdMarker", s->id_marker, sizeof(s->id_marker)) < 0)
		return 0;
	return 1;
}

/* Unfinished multipart uploads under the prefix, older than @min_age_ms, are aborted. */
static int s3_sweep(struct objstore *os, int64_t min_age_ms, struct err *e)
{
	struct sweep s = {.os = os, .cutoff_ms = now_ms() - min_age_ms};
	_cleanup_strbuf_ struct strbuf out = {.max = XML_ANSWER_MAX};
	int rc, more;
	do {
		const struct s3_param params[] = {{"uploads", NULL},
						  {"prefix", s3_client_prefix(client(os))},
						  {"key-marker", s.key_marker},
						  {"upload-id-marker", s.id_marker}};
		struct s3_req r = s3_req_make("list the uploads in", "GET", NULL);
		r.params = params;
		r.nparams = s.key_marker[0] ? 4 : 2; /* no markers the first time */
		r.out = &out;
		struct err inner = {0};
		rc = s3_request(client(os), &r, &inner);
		/* Servers without ListMultipartUploads (s3rver) keep no uploads to sweep. */
		if (rc < 0 && !strcmp(r.code, "NotImplemented"))
			return s.count;
		if (rc < 0 && e)
			*e = inner;
		struct xml_span doc = {strbuf_str(&out), out.len};
		if (rc == 0)
			rc = sweep_page(&s, doc, e);
		more = rc == 0 ? sweep_next(&s, doc) : 0;
	} while (more);
	return rc < 0 ? rc : s.count;
}

static void s3_close(struct objstore *os)
{
	s3_client_close(client(os));
	free(os);
}

static const struct objstore_ops s3_ops = {
    .put_file = s3_put_file,
    .put_buf = s3_put_buf,
    .get_file = s3_get_file,
    .get_buf = s3_get_buf,
    .get_range = s3_get_range,
    .del = s3_del,
    .list = s3_list,
    .sweep = s3_sweep,
    .close = s3_close,
};

int objstore_s3_open(const char *url, struct objstore **out, struct err *e)
{
	_cleanup_free_ struct s3_store *s = calloc(1, sizeof(*s));
	if (!s)
		return err_set(e, ENOMEM, "out of memory");
	int rc = s3_client_open(url, &s->c, e);
	if (rc < 0)
		return rc;
	snprintf(s->os.url, sizeof(s->os.url), "%s", s3_client_url(s->c));
	s->os.ops = &s3_ops;
	*out = &steal_ptr(s)->os;
	return 0;
}
