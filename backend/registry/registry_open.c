/*
 * registry_open.c - registry_open() and registry_close(): the file made
 * 0600, the connection configured (WAL), the schema migrated
 * (registry_schema.c). Above the other registry files: nothing calls back.
 */
#include "backend/registry/registry_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/util.h"

#define BUSY_TIMEOUT_MS 5000

static void registry_closep(struct registry **reg)
{
	registry_close(*reg);
}

/* Create the file ourselves so it is 0600: its env column holds secrets, and -wal/-shm copy the
 * mode. */
static int create_private(const char *path)
{
	_cleanup_close_ int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return error(errno, "registry: opening %s failed: %s", path, strerror(errno));
	if (fchmod(fd, 0600) < 0)
		warning("registry: chmod 0600 %s failed: %s", path, strerror(errno));
	return 0;
}

static int configure(struct registry *reg, const char *path)
{
	sqlite3_extended_result_codes(reg->db, 1);
	sqlite3_busy_timeout(reg->db, BUSY_TIMEOUT_MS);
	int r = reg_exec(reg, "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = OFF;");
	if (r < 0)
		return r;
	char mode[REG_WORD_MAX] = "";
	r = reg_query(reg, "PRAGMA journal_mode = WAL", NULL, reg_word_row, mode);
	if (r < 0)
		return r;
	if (strcmp(mode, "wal") != 0)
		warning("registry: %s stays in journal mode %s, not WAL", path, mode);
	return 0;
}

int registry_open(const char *path, struct registry **out)
{
	_cleanup_(registry_closep) struct registry *reg = calloc(1, sizeof(*reg));
	if (!reg)
		return -ENOMEM;
	pthread_mutex_init(&reg->stmt_lock, NULL);
	int r = create_private(path);
	if (r < 0)
		return r;
	int flags = SQLITE_OPEN_FULLMUTEX | SQLITE_OPEN_CREATE | SQLITE_OPEN_READWRITE;
	int rc = sqlite3_open_v2(path, &reg->db, flags, NULL);
	if (rc != SQLITE_OK)
		return error(EIO, "registry: opening %s failed: %s", path,
			     reg->db ? sqlite3_errmsg(reg->db) : sqlite3_errstr(rc));
	r = configure(reg, path);
	if (r < 0)
		return r;
	r = reg_migrate(reg, path);
	if (r < 0)
		return r;
	*out = steal_ptr(reg);
	return 0;
}

void registry_close(struct registry *reg)
{
	if (!reg)
		return;
	for (size_t i = 0; i < STMT_KEPT; i++)
		sqlite3_finalize(reg->stmt[i].st);
	pthread_mutex_destroy(&reg->stmt_lock);
	int rc = sqlite3_close(reg->db);
	if (rc != SQLITE_OK)
		error(EIO, "registry: closing failed: %s", sqlite3_errstr(rc));
	free(reg);
}
