/* SPDX-License-Identifier: MIT */
/* Opening the local database: the writer lock, pragmas, schema migrations and the integrity
 * check, with errors that name the file and say what to do. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file-mode.h"
#include "macro.h"
#include "sqlite-errno.h"
#include "store-internal.h"

/* 'rtsk': marks the file as ours, so another program's SQLite file is refused by name. */
#define STORE_APPLICATION_ID 0x7274736b

/* Migration N takes the schema from version N to N+1.  Never edit a released entry: add one. */
static const char *const migrations[] = {
        /* 0 -> 1: the first schema. */
        "CREATE TABLE runs ("
        "  id INTEGER PRIMARY KEY,"
        "  machine_id TEXT NOT NULL, boot_id TEXT NOT NULL, hostname TEXT NOT NULL,"
        "  kernel_release TEXT NOT NULL, kernel_version TEXT NOT NULL,"
        "  kernel_cmdline TEXT NOT NULL, preempt_model TEXT NOT NULL,"
        "  daemon_version TEXT NOT NULL, config_digest TEXT NOT NULL, config TEXT NOT NULL,"
        "  cpus TEXT NOT NULL, priority INTEGER NOT NULL, probe_interval_ns INTEGER NOT NULL,"
        "  interval_ns INTEGER NOT NULL, threshold_ns INTEGER NOT NULL,"
        "  hist_limit_us INTEGER NOT NULL,"
        "  start_ns INTEGER NOT NULL, last_seen_ns INTEGER, end_ns INTEGER,"
        "  end_reason TEXT CHECK (end_reason IN ('clean', 'unclean', 'error')),"
        "  end_message TEXT);"
        "CREATE TABLE intervals ("
        "  id INTEGER PRIMARY KEY,"
        "  run_id INTEGER NOT NULL REFERENCES runs(id),"
        "  seq INTEGER NOT NULL, start_ns INTEGER NOT NULL, length_ns INTEGER NOT NULL,"
        "  scenario TEXT,"
        "  UNIQUE (run_id, seq));"
        "CREATE INDEX intervals_start ON intervals(start_ns);"
        "CREATE TABLE interval_cpus ("
        "  interval_id INTEGER NOT NULL REFERENCES intervals(id),"
        "  cpu INTEGER NOT NULL CHECK (cpu >= 0),"
        "  start_ns INTEGER NOT NULL, length_ns INTEGER NOT NULL CHECK (length_ns >= 0),"
        "  samples INTEGER NOT NULL CHECK (samples >= 0),"
        "  min_ns INTEGER NOT NULL, max_ns INTEGER NOT NULL, sum_ns INTEGER NOT NULL,"
        "  max_time_ns INTEGER NOT NULL,"
        "  violations INTEGER NOT NULL, missed INTEGER NOT NULL,"
        "  hist_limit_us INTEGER NOT NULL, hist BLOB NOT NULL,"
        "  UNIQUE (interval_id, cpu));"
        "CREATE INDEX interval_cpus_start ON interval_cpus(start_ns);"
        "CREATE TABLE events ("
        "  id INTEGER PRIMARY KEY,"
        "  run_id INTEGER REFERENCES runs(id),"
        "  interval_id INTEGER REFERENCES intervals(id),"
        "  time_ns INTEGER NOT NULL, type TEXT NOT NULL,"
        "  cpu INTEGER, value_ns INTEGER, message TEXT NOT NULL DEFAULT '');"
        "CREATE INDEX events_time ON events(time_ns);",
        /* 1 -> 2: what load ran in each interval and how much work it did. */
        "CREATE INDEX intervals_scenario ON intervals(scenario, start_ns);"
        "CREATE TABLE interval_loads ("
        "  interval_id INTEGER NOT NULL REFERENCES intervals(id),"
        "  idx INTEGER NOT NULL CHECK (idx >= 0),"
        "  generator TEXT NOT NULL,"
        "  up_ns INTEGER NOT NULL CHECK (up_ns >= 0),"
        "  starts INTEGER NOT NULL CHECK (starts >= 0),"
        "  exits INTEGER NOT NULL CHECK (exits >= 0),"
        "  UNIQUE (interval_id, idx));"
        "CREATE TABLE interval_load_metrics ("
        "  interval_id INTEGER NOT NULL REFERENCES intervals(id),"
        "  idx INTEGER NOT NULL, metric TEXT NOT NULL, unit TEXT NOT NULL, value REAL NOT NULL,"
        "  UNIQUE (interval_id, idx, metric));",
        /* 2 -> 3: the upload outbox, filled in the transaction that stores what it carries. */
        "CREATE TABLE outbox ("
        "  id INTEGER PRIMARY KEY,"
        "  run_id INTEGER NOT NULL REFERENCES runs(id),"
        "  interval_id INTEGER REFERENCES intervals(id),"
        "  event_id INTEGER REFERENCES events(id),"
        "  created_ns INTEGER NOT NULL,"
        "  state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sent', 'rejected')),"
        "  attempts INTEGER NOT NULL DEFAULT 0,"
        "  done_ns INTEGER, message TEXT,"
        "  CHECK ((interval_id IS NULL) != (event_id IS NULL)));"
        "CREATE INDEX outbox_pending ON outbox(state, id);"
        "CREATE TABLE upload_status ("
        "  id INTEGER PRIMARY KEY CHECK (id = 1),"
        "  last_success_ns INTEGER, last_error_ns INTEGER, last_error TEXT);"
        "INSERT INTO upload_status (id) VALUES (1);",
        /* 3 -> 4: when the machine booted (for the uptime of a boot that died), and structured
         * details of an event (the forensics of an unclean end), as a JSON object. */
        "ALTER TABLE runs ADD COLUMN boot_ns INTEGER;"
        "ALTER TABLE events ADD COLUMN details TEXT CHECK (details IS NULL OR "
        "json_valid(details));"
        /* What retention needs to delete old rows without scanning whole tables. */
        "CREATE INDEX events_interval ON events(interval_id) WHERE interval_id IS NOT NULL;"
        "CREATE INDEX outbox_interval ON outbox(interval_id) WHERE interval_id IS NOT NULL;"
        "CREATE INDEX outbox_event ON outbox(event_id) WHERE event_id IS NOT NULL;",
        /* 4 -> 5: the name a run is judged under by the farm ([Upload] Release=, else the
         * kernel's release); NULL for the runs before, which the farm judges by their kernel. */
        "ALTER TABLE runs ADD COLUMN release TEXT;",
        /* 5 -> 6: captures of the trace flight recorder, each stored with the interval that
         * carries it to the farm (its analysis as JSON, the culprit in columns for listing,
         * the raw events compressed), and what each run's flight recorder was. */
        "ALTER TABLE runs ADD COLUMN trace TEXT CHECK (trace IS NULL OR json_valid(trace));"
        "CREATE TABLE traces ("
        "  id INTEGER PRIMARY KEY,"
        "  run_id INTEGER NOT NULL REFERENCES runs(id),"
        "  interval_id INTEGER REFERENCES intervals(id),"
        "  cpu INTEGER NOT NULL CHECK (cpu >= 0),"
        "  time_ns INTEGER NOT NULL, latency_ns INTEGER NOT NULL CHECK (latency_ns >= 0),"
        "  analysis TEXT NOT NULL CHECK (json_valid(analysis)),"
        "  summary TEXT NOT NULL, culprit_kind TEXT NOT NULL, culprit_name TEXT NOT NULL,"
        "  culprit_pid INTEGER, culprit_ns INTEGER NOT NULL CHECK (culprit_ns >= 0),"
        "  raw BLOB, raw_events INTEGER NOT NULL DEFAULT 0, raw_dropped INTEGER NOT NULL "
        "  DEFAULT 0);"
        "CREATE INDEX traces_time ON traces(time_ns);"
        "CREATE INDEX traces_interval ON traces(interval_id) WHERE interval_id IS NOT NULL;",
        /* 6 -> 7: the machine's inventory, in versions per run, each as a JSON object of its
         * fields.  event_id is the event that carries a version to the farm; not a foreign key:
         * retention deletes old events, and the versions stay with their run. */
        "CREATE TABLE inventory ("
        "  id INTEGER PRIMARY KEY,"
        "  run_id INTEGER NOT NULL REFERENCES runs(id),"
        "  version INTEGER NOT NULL CHECK (version >= 1),"
        "  time_ns INTEGER NOT NULL, after_ns INTEGER,"
        "  fields TEXT NOT NULL CHECK (json_valid(fields)),"
        "  event_id INTEGER,"
        "  UNIQUE (run_id, version));"
        "CREATE INDEX inventory_event ON inventory(event_id) WHERE event_id IS NOT NULL;",
};
_Static_assert(ELEMENTSOF(migrations) == STORE_SCHEMA_VERSION, "one migration per version");

int store_fail(store *s, int rc, const char *what) {
        snprintf(s->error, sizeof(s->error), "%s: %s: %s", s->path, what,
                 s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
        return sqlite_errno(rc);
}

int store_failf(store *s, int error, const char *fmt, ...) {
        char msg[STORE_ERROR_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        snprintf(s->error, sizeof(s->error), "%s: %s", s->path, msg);
        return error < 0 ? error : -error;
}

const char *store_error(const store *s) {
        return s->error;
}

int store_exec(store *s, const char *sql) {
        int rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
        if (rc != SQLITE_OK)
                return store_fail(s, rc, sql);
        return 0;
}

int store_prepare(store *s, const char *sql, sqlite3_stmt **ret) {
        int rc = sqlite3_prepare_v2(s->db, sql, -1, ret, NULL);
        if (rc != SQLITE_OK)
                return store_fail(s, rc, "cannot prepare query");
        return 0;
}

static int pragma_int(store *s, const char *sql, int64_t *ret) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
        if (rc != SQLITE_OK)
                return store_fail(s, rc, "cannot read database header");
        rc = sqlite3_step(st);
        if (rc != SQLITE_ROW)
                return store_fail(s, rc, "cannot read database header");
        *ret = sqlite3_column_int64(st, 0);
        return 0;
}

static int quick_check(store *s) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v2(s->db, "PRAGMA quick_check", -1, &st, NULL);
        if (rc != SQLITE_OK)
                return store_fail(s, rc, "integrity check failed");
        rc = sqlite3_step(st);
        if (rc != SQLITE_ROW)
                return store_fail(s, rc, "integrity check failed");
        const char *res = (const char *) sqlite3_column_text(st, 0);
        if (!res || strcmp(res, "ok") != 0)
                return store_failf(s, -EBADMSG,
                                   "database is corrupt (quick_check: %s); keep the file for "
                                   "analysis, move it aside and restart to begin a new one",
                                   res ?: "no result");
        return 0;
}

static int migrate(store *s, int64_t version) {
        for (int64_t v = version; v < STORE_SCHEMA_VERSION; v++) {
                char sql[64];
                int r = store_exec(s, "BEGIN IMMEDIATE");
                if (r < 0)
                        return r;
                r = store_exec(s, migrations[v]);
                if (r >= 0) {
                        snprintf(sql, sizeof(sql), "PRAGMA user_version = %lld", (long long) v + 1);
                        r = store_exec(s, sql);
                }
                if (r >= 0 && v == 0) {
                        snprintf(sql, sizeof(sql), "PRAGMA application_id = %d",
                                 STORE_APPLICATION_ID);
                        r = store_exec(s, sql);
                }
                if (r >= 0)
                        r = store_exec(s, "COMMIT");
                if (r < 0) {
                        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
                        return r;
                }
        }
        return 0;
}

static char *lock_path(const char *path) {
        char *p;
        return asprintf(&p, "%s.lock", path) < 0 ? NULL : p;
}

bool store_writer_active(const char *path) {
        _cleanup_free_ char *lp = lock_path(path);
        _cleanup_close_ int fd = -1;
        if (!lp)
                return false;
        fd = open(lp, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return false;
        if (flock(fd, LOCK_SH | LOCK_NB) < 0)
                return errno == EWOULDBLOCK;
        flock(fd, LOCK_UN);
        return false;
}

void store_close(store *s) {
        if (!s)
                return;
        if (s->db)
                sqlite3_close_v2(s->db);
        if (s->lock_fd >= 0)
                close(s->lock_fd); /* drops the flock */
        free(s->path);
        free(s);
}

static int take_lock(store *s) {
        _cleanup_free_ char *lp = lock_path(s->path);
        if (!lp)
                return -ENOMEM;
        int r = file_create_mode(lp, STORE_FILE_MODE, NULL);
        s->lock_fd = r < 0 ? -1 : open(lp, O_RDWR | O_CLOEXEC);
        if (r < 0)
                errno = -r;
        if (s->lock_fd < 0)
                return store_failf(s, -errno, "cannot create lock file '%s': %s", lp,
                                   strerror(errno));
        if (flock(s->lock_fd, LOCK_EX | LOCK_NB) < 0) {
                if (errno == EWOULDBLOCK)
                        return store_failf(s, -EBUSY,
                                           "another rtsoakd is already writing this database "
                                           "(lock '%s' is held)",
                                           lp);
                return store_failf(s, -errno, "cannot lock '%s': %s", lp, strerror(errno));
        }
        return 0;
}

/* The file: the writer's lock, or that a reader's database is there; never a directory; the
 * writer creates it with the readers' mode; then SQLite opens it. */
static int open_file(store *s, const char *path) {
        int r;
        if (s->writer) {
                r = take_lock(s);
                if (r < 0)
                        return r;
        } else if (access(path, F_OK) < 0) {
                return store_failf(s, -errno,
                                   "no database here (%s); is rtsoakd configured to "
                                   "write elsewhere? Use --db PATH",
                                   strerror(errno));
        }
        struct stat st;
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
                return store_failf(s, -EISDIR, "a directory, not a database file");

        /* Created 0640 (readable by the group of rtsoak's readers), whatever the umask. */
        if (s->writer && (r = file_create_mode(path, STORE_FILE_MODE, NULL)) < 0)
                return store_failf(s, r, "cannot create the database: %s", strerror(-r));
        int rc = sqlite3_open_v2(path, &s->db,
                                 s->writer     ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
                                 : s->uploader ? SQLITE_OPEN_READWRITE
                                               : SQLITE_OPEN_READONLY,
                                 NULL);
        if (rc != SQLITE_OK)
                return store_fail(s, rc, "cannot open database");
        sqlite3_extended_result_codes(s->db, 1);
        sqlite3_busy_timeout(s->db, 5000);
        return 0;
}

/* Whose database it is: ours (its schema version in *ret_version, 0 for a new empty file),
 * another program's, or a newer rtsoak's. */
static int check_identity(store *s, int64_t *ret_version) {
        int64_t version, appid;
        /* The first read fails with SQLITE_NOTADB for a file that is not SQLite at all. */
        int r = pragma_int(s, "PRAGMA application_id", &appid);
        if (r < 0)
                return r;
        r = pragma_int(s, "PRAGMA user_version", &version);
        if (r < 0)
                return r;

        if (version == 0 && appid == 0) {
                int64_t tables;
                r = pragma_int(s, "SELECT count(*) FROM sqlite_schema", &tables);
                if (r < 0)
                        return r;
                if (tables > 0)
                        return store_failf(s, -EBADMSG,
                                           "SQLite database of another program "
                                           "(no rtsoak schema); refusing to touch it");
                if (!s->writer)
                        return store_failf(s, -ENODATA,
                                           "database is empty: rtsoakd has not "
                                           "written anything yet");
        } else if (appid != STORE_APPLICATION_ID) {
                return store_failf(s, -EBADMSG,
                                   "SQLite database of another program "
                                   "(application_id %#llx); refusing to touch it",
                                   (unsigned long long) appid);
        }
        if (version > STORE_SCHEMA_VERSION)
                return store_failf(s, -EPROTONOSUPPORT,
                                   "database schema version %lld is newer than this rtsoak "
                                   "understands (%d); upgrade rtsoak",
                                   (long long) version, STORE_SCHEMA_VERSION);
        *ret_version = version;
        return 0;
}

/* The writer: WAL, full syncs, the integrity check, the schema brought up to date.  The
 * uploader: full syncs.  A reader: a schema it understands. */
static int set_up(store *s, int64_t version) {
        int r = 0;
        if (s->writer) {
                /* WAL lets the CLI read while we write; FULL syncs the WAL on every commit, so
                 * an interval that was committed survives power loss. */
                r = store_exec(s, "PRAGMA journal_mode = WAL");
                if (r >= 0)
                        r = store_exec(s, "PRAGMA synchronous = FULL");
                if (r >= 0)
                        r = store_exec(s, "PRAGMA foreign_keys = ON");
                if (r >= 0)
                        r = quick_check(s);
                /* A new file returns the pages that retention frees, step by step. */
                if (r >= 0 && version == 0)
                        r = store_exec(s, "PRAGMA auto_vacuum = INCREMENTAL");
                if (r >= 0)
                        r = migrate(s, version);
                if (r >= 0)
                        r = store_setup_vacuum(s);
        } else if (s->uploader && version == STORE_SCHEMA_VERSION) {
                r = store_exec(s, "PRAGMA synchronous = FULL");
        } else if (version < STORE_SCHEMA_VERSION) {
                r = store_failf(s, -EPROTONOSUPPORT,
                                "database schema version %lld is older than this rtsoak "
                                "expects (%d); start rtsoakd once to migrate it",
                                (long long) version, STORE_SCHEMA_VERSION);
        }
        return r;
}

int store_open(const char *path, unsigned flags, store **ret, char err[static STORE_ERROR_MAX]) {
        int64_t version = 0;
        int r;

        store *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->lock_fd = -1;
        s->writer = flags & STORE_WRITER;
        s->uploader = flags & STORE_UPLOADER;
        s->path = strdup(path);
        if (!s->path) {
                free(s);
                return -ENOMEM;
        }
        r = open_file(s, path);
        if (r >= 0)
                r = check_identity(s, &version);
        if (r >= 0)
                r = set_up(s, version);
        if (r < 0) {
                snprintf(err, STORE_ERROR_MAX, "%s", s->error);
                store_close(s);
                return r;
        }
        *ret = s;
        return 0;
}
