/* SPDX-License-Identifier: MIT */
/* The statement API on PostgreSQL (libpq): ? parameters turned into $N, statements prepared
 * on the server once per connection, values sent as text (blobs as bytea), results read as
 * text, SQLSTATEs as -errno, and a lost connection re-opened between transactions. */
#include <errno.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sql-internal.h"

/* Type OIDs of pg_type that are sent or read here. */
#define OID_BOOL 16
#define OID_BYTEA 17
#define OID_INT8 20
#define OID_TEXT 25
#define OID_FLOAT8 701

/* How long a statement waits for a row lock before it fails with -EBUSY, like SQLite's busy
 * timeout. */
#define LOCK_TIMEOUT "10s"

struct pg_conn {
        struct sql_conn base;
        PGconn *pg;
        char shown[512];
        unsigned generation; /* of the session: statements prepared in an older one are gone */
        unsigned names;
        bool in_txn;   /* a transaction was begun and not ended */
        bool txn_lost; /* ... and the connection was lost meanwhile */
        bool readonly;
        /* COPY ... FROM STDIN in progress: rows in text format, sent in large pieces. */
        struct {
                char *buf;
                size_t len, cap;
                unsigned field;
                int error;
        } copy;
};

enum pg_kind {
        P_NULL,
        P_INT,
        P_DOUBLE,
        P_TEXT,
        P_BLOB,
};

struct pg_param {
        enum pg_kind kind;
        size_t off, len;
};

struct pg_stmt {
        struct sql_stmt base;
        char *text; /* with $N */
        int nparams;
        bool *uses; /* uses[N]: the text has ?N (one may be skipped: ?1, ?2, ?4) */
        bool persistent;
        char name[16];
        unsigned prepared; /* the session generation it was prepared in; 0: not yet */
        struct pg_param *params;
        const char **values;
        int *lengths, *formats;
        char *buf; /* the parameters' values */
        size_t used, cap;
        int bind_err;
        PGresult *res;
        int row, nrows;
        bool done;
        /* Blobs of the current row, decoded from bytea's hex. */
        unsigned char **blob;
        size_t *blob_cap;
        int nblob;
};

static struct pg_conn *pc(const sql_conn *c) {
        return (struct pg_conn *) c;
}

static struct pg_stmt *ps(sql_stmt *st) {
        return (struct pg_stmt *) st;
}

/* The -errno of a SQLSTATE: what the callers tell apart (retry later, retry now, a constraint,
 * a full disk ...). */
static int state_errno(const char *state) {
        static const struct {
                const char *prefix;
                int error;
        } map[] = {
                { "23", -EEXIST },     /* integrity constraint violation */
                { "40001", -EAGAIN },  /* serialization failure */
                { "40P01", -EAGAIN },  /* deadlock detected */
                { "55P03", -EBUSY },   /* lock not available (lock_timeout) */
                { "57014", -EBUSY },   /* query canceled (statement_timeout) */
                { "57P", -EBUSY },     /* the server shuts down or starts */
                { "08", -EBUSY },      /* connection exception */
                { "53100", -ENOSPC },  /* disk full */
                { "53200", -ENOMEM },  /* out of memory */
                { "53300", -EBUSY },   /* too many connections */
                { "53", -ENOSPC },     /* insufficient resources */
                { "25006", -EACCES },  /* read-only transaction */
                { "42501", -EACCES },  /* insufficient privilege */
                { "28", -EACCES },     /* invalid authorization */
                { "3D000", -ENOENT },  /* no such database */
                { "XX001", -EBADMSG }, /* data corrupted */
                { "XX002", -EBADMSG }, /* index corrupted */
                { "22", -EINVAL },     /* data exception */
        };
        for (size_t i = 0; state && i < ELEMENTSOF(map); i++)
                if (strncmp(state, map[i].prefix, strlen(map[i].prefix)) == 0)
                        return map[i].error;
        return -EIO;
}

/* libpq's messages end with a newline and may span lines: one line for ours. */
static void set_message(struct pg_conn *c, const char *what, const char *msg) {
        char one[SQL_ERROR_MAX];
        snprintf(one, sizeof(one), "%s", msg && *msg ? msg : "no message");
        for (char *p = one; *p; p++)
                if (*p == '\n')
                        *p = p[1] ? ' ' : '\0';
        if (what)
                sql_set_error(&c->base, "%s: %s", what, one);
        else
                sql_set_error(&c->base, "%s", one);
}

/* Records the failure of res (NULL: of the connection) and returns its -errno. */
static int fail_result(struct pg_conn *c, const PGresult *res, const char *what) {
        if (!res || PQstatus(c->pg) == CONNECTION_BAD) {
                set_message(c, what, PQerrorMessage(c->pg));
                if (c->in_txn)
                        c->txn_lost = true;
                return -EBUSY;
        }
        set_message(c, what, PQresultErrorMessage(res));
        /* A row of a partitioned table whose partition is not there: -ENOENT, so that the
         * caller can make it. */
        const char *primary = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
        if (primary && strncmp(primary, "no partition of relation", 24) == 0)
                return -ENOENT;
        return state_errno(PQresultErrorField(res, PG_DIAG_SQLSTATE));
}

static void ignore_notice(void *arg, const char *message) {
}

static int session_setup(struct pg_conn *c) {
        char sql[256];
        snprintf(sql, sizeof(sql),
                 "SET lock_timeout = '%s'; SET bytea_output = 'hex'; SET client_encoding = 'UTF8'; "
                 "SET default_transaction_read_only = %s",
                 LOCK_TIMEOUT, c->readonly ? "on" : "off");
        PGresult *res = PQexec(c->pg, sql);
        int r = PQresultStatus(res) == PGRES_COMMAND_OK
                        ? 0
                        : fail_result(c, res, "cannot set up the session");
        PQclear(res);
        c->generation++;
        return r;
}

static void pg_close(sql_conn *base) {
        struct pg_conn *c = pc(base);
        if (c->pg)
                PQfinish(c->pg);
        free(c->copy.buf);
        free(c);
}

static int pg_open(const char *target, unsigned flags, sql_conn **ret, char *err) {
        struct pg_conn *c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        sql_target_shown(target, c->shown, sizeof(c->shown));
        c->readonly = flags & SQL_OPEN_READONLY;
        /* What the URI says comes after, and wins. */
        const char *keys[] = { "connect_timeout", "fallback_application_name", "dbname", NULL };
        const char *values[] = { "10", "rtsoak-server", target, NULL };
        c->pg = PQconnectdbParams(keys, values, 1);
        int r = 0;
        if (!c->pg)
                r = -ENOMEM;
        else if (PQstatus(c->pg) != CONNECTION_OK && (flags & SQL_OPEN_RETRY) &&
                 !strstr(PQerrorMessage(c->pg), "invalid")) {
                PQsetNoticeProcessor(c->pg, ignore_notice, NULL);
        } else if (PQstatus(c->pg) != CONNECTION_OK) {
                set_message(c, "cannot connect", PQerrorMessage(c->pg));
                /* A refused password, an unknown database, a server that is not there: the
                 * message says which. */
                r = strstr(c->base.errmsg, "does not exist") ? -ENOENT
                    : strstr(c->base.errmsg, "authentication") || strstr(c->base.errmsg, "password")
                            ? -EACCES
                            : -ECONNREFUSED;
        } else {
                PQsetNoticeProcessor(c->pg, ignore_notice, NULL);
                r = session_setup(c);
        }
        if (r < 0) {
                snprintf(err, SQL_ERROR_MAX, "%s: %s", c->shown,
                         r == -ENOMEM ? "out of memory" : c->base.errmsg);
                pg_close(&c->base);
                return r;
        }
        *ret = &c->base;
        return 0;
}

/* Before a statement: a connection lost between transactions is opened again (its prepared
 * statements are gone with it); one lost inside a transaction fails until it is ended. */
static int usable(struct pg_conn *c) {
        if (c->txn_lost) {
                sql_set_error(&c->base, "the connection to the database was lost in a transaction");
                return -EBUSY;
        }
        if (PQstatus(c->pg) == CONNECTION_OK)
                return 0;
        PQreset(c->pg);
        if (PQstatus(c->pg) != CONNECTION_OK) {
                set_message(c, "cannot connect to the database", PQerrorMessage(c->pg));
                return -EBUSY;
        }
        return session_setup(c);
}

static int pg_exec(sql_conn *base, const char *sql) {
        struct pg_conn *c = pc(base);
        int r = usable(c);
        if (r < 0)
                return r;
        PGresult *res = PQexec(c->pg, sql);
        ExecStatusType s = PQresultStatus(res);
        r = s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK ? 0 : fail_result(c, res, NULL);
        PQclear(res);
        return r;
}

static int pg_begin(sql_conn *base, enum sql_txn kind) {
        struct pg_conn *c = pc(base);
        int r = pg_exec(base, kind == SQL_TXN_SNAPSHOT
                                      ? "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
                                      : "BEGIN");
        if (r >= 0)
                c->in_txn = true;
        return r;
}

/* COMMIT, which answers ROLLBACK for a transaction that failed earlier. */
static int commit(struct pg_conn *c) {
        int r = usable(c);
        if (r < 0)
                return r;
        PGresult *res = PQexec(c->pg, "COMMIT");
        if (PQresultStatus(res) != PGRES_COMMAND_OK)
                r = fail_result(c, res, "cannot commit");
        else if (strcmp(PQcmdStatus(res), "COMMIT") != 0) {
                sql_set_error(&c->base, "the transaction failed earlier and was rolled back");
                r = -EIO;
        }
        PQclear(res);
        return r;
}

static int pg_end(sql_conn *base, bool do_commit) {
        struct pg_conn *c = pc(base);
        int r = 0;
        if (c->txn_lost) {
                if (do_commit) {
                        sql_set_error(base, "the connection to the database was lost in a "
                                            "transaction, which was not committed");
                        r = -EBUSY;
                }
        } else if (do_commit)
                r = commit(c);
        else if (PQstatus(c->pg) == CONNECTION_OK && PQtransactionStatus(c->pg) != PQTRANS_IDLE)
                PQclear(PQexec(c->pg, "ROLLBACK"));
        c->in_txn = c->txn_lost = false;
        return r;
}

static bool pg_in_txn(const sql_conn *base) {
        const struct pg_conn *c = pc(base);
        if (c->txn_lost)
                return true;
        PGTransactionStatusType s = PQtransactionStatus(c->pg);
        return s == PQTRANS_INTRANS || s == PQTRANS_INERROR || s == PQTRANS_ACTIVE;
}

/* sql with ? and ?N made $N (quoted strings, identifiers and comments left alone); the
 * number of parameters in ret_n, and which of them it uses in ret_used. */
static char *convert(const char *sql, int *ret_n, bool **ret_used) {
        size_t len = strlen(sql);
        char *out = malloc(len * 4 + 16), *o = out;
        bool *used = calloc(len + 2, sizeof(*used));
        int max = 0;
        if (!out || !used) {
                free(out);
                free(used);
                return NULL;
        }
        for (const char *p = sql; *p;) {
                if (*p == '\'' || *p == '"') {
                        char q = *p;
                        *o++ = *p++;
                        while (*p && !(*p == q && p[1] != q))
                                if (*p == q) {
                                        *o++ = *p++;
                                        *o++ = *p++;
                                } else
                                        *o++ = *p++;
                        if (*p)
                                *o++ = *p++;
                } else if (p[0] == '-' && p[1] == '-') {
                        while (*p && *p != '\n')
                                *o++ = *p++;
                } else if (*p == '?') {
                        int n = 0;
                        p++;
                        if (*p >= '0' && *p <= '9')
                                while (*p >= '0' && *p <= '9')
                                        n = n * 10 + (*p++ - '0');
                        else
                                n = max + 1;
                        max = MAX(max, n);
                        if (n <= (int) len + 1)
                                used[n] = true;
                        o += sprintf(o, "$%d", n);
                } else
                        *o++ = *p++;
        }
        *o = '\0';
        *ret_n = max;
        *ret_used = used;
        return out;
}

static void pg_finalize(sql_stmt *st) {
        struct pg_stmt *s = ps(st);
        PQclear(s->res);
        for (int i = 0; i < s->nblob; i++)
                free(s->blob[i]);
        free(s->blob);
        free(s->blob_cap);
        free(s->text);
        free(s->uses);
        free(s->params);
        free(s->values);
        free(s->lengths);
        free(s->formats);
        free(s->buf);
        free(s);
}

static int pg_prepare(sql_conn *base, const char *sql, bool persistent, sql_stmt **ret) {
        struct pg_stmt *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->persistent = persistent;
        s->text = convert(sql, &s->nparams, &s->uses);
        int n = MAX(s->nparams, 1);
        s->params = calloc((size_t) n, sizeof(*s->params));
        s->values = calloc((size_t) n, sizeof(*s->values));
        s->lengths = calloc((size_t) n, sizeof(*s->lengths));
        s->formats = calloc((size_t) n, sizeof(*s->formats));
        if (!s->text || !s->params || !s->values || !s->lengths || !s->formats) {
                pg_finalize(&s->base);
                return -ENOMEM;
        }
        if (persistent)
                snprintf(s->name, sizeof(s->name), "r%u", ++pc(base)->names);
        *ret = &s->base;
        return 0;
}

static void pg_reset(sql_stmt *st) {
        struct pg_stmt *s = ps(st);
        PQclear(s->res);
        s->res = NULL;
        s->row = s->nrows = 0;
        s->done = false;
        s->used = 0;
        s->bind_err = 0;
        memset(s->params, 0, (size_t) MAX(s->nparams, 1) * sizeof(*s->params));
}

/* Room for a parameter's value of len bytes (and a NUL). */
static char *param_room(struct pg_stmt *s, int i, enum pg_kind kind, size_t len) {
        if (i < 1 || i > s->nparams) {
                s->bind_err = s->bind_err ?: -ERANGE;
                return NULL;
        }
        if (s->used + len + 1 > s->cap) {
                size_t cap = MAX(s->cap * 2, s->used + len + 1);
                cap = MAX(cap, 256);
                char *x = realloc(s->buf, cap);
                if (!x) {
                        s->bind_err = s->bind_err ?: -ENOMEM;
                        return NULL;
                }
                s->buf = x;
                s->cap = cap;
        }
        s->params[i - 1] = (struct pg_param){ kind, s->used, len };
        char *p = s->buf + s->used;
        s->used += len + 1;
        p[len] = '\0';
        return p;
}

static void pg_bind_int64(sql_stmt *st, int i, int64_t v) {
        char text[24];
        int n = snprintf(text, sizeof(text), "%lld", (long long) v);
        char *p = param_room(ps(st), i, P_INT, (size_t) n);
        if (p)
                memcpy(p, text, (size_t) n);
}

static void pg_bind_double(sql_stmt *st, int i, double v) {
        char text[40];
        int n = snprintf(text, sizeof(text), "%.17g", v);
        char *p = param_room(ps(st), i, P_DOUBLE, (size_t) n);
        if (p)
                memcpy(p, text, (size_t) n);
}

static void pg_bind_text(sql_stmt *st, int i, const char *v) {
        size_t n = strlen(v);
        char *p = param_room(ps(st), i, P_TEXT, n);
        if (p)
                memcpy(p, v, n);
}

static void pg_bind_blob(sql_stmt *st, int i, const void *v, size_t n) {
        char *p = param_room(ps(st), i, P_BLOB, n);
        if (p && n)
                memcpy(p, v, n);
}

static void pg_bind_null(sql_stmt *st, int i) {
        struct pg_stmt *s = ps(st);
        if (i < 1 || i > s->nparams)
                s->bind_err = s->bind_err ?: -ERANGE;
        else
                s->params[i - 1] = (struct pg_param){ P_NULL, 0, 0 };
}

/* A parameter's type: what it was bound to first; for NULL the one its place in the statement
 * gives it, or text for a number the statement skips (PostgreSQL wants a type for each). */
static Oid param_type(const struct pg_stmt *s, int i) {
        if (!s->uses[i + 1])
                return OID_TEXT;
        switch (s->params[i].kind) {
        case P_INT:
                return OID_INT8;
        case P_DOUBLE:
                return OID_FLOAT8;
        case P_TEXT:
                return OID_TEXT;
        case P_BLOB:
                return OID_BYTEA;
        default:
                return 0; /* NULL: the type the statement gives it */
        }
}

/* Prepares the statement on the server (in this session), typed by its first parameters. */
static int server_prepare(struct pg_conn *c, struct pg_stmt *s) {
        Oid types[s->nparams + 1];
        for (int i = 0; i < s->nparams; i++)
                types[i] = param_type(s, i);
        PGresult *res = PQprepare(c->pg, s->name, s->text, s->nparams, types);
        int r = PQresultStatus(res) == PGRES_COMMAND_OK
                        ? 0
                        : fail_result(c, res, "cannot prepare query");
        PQclear(res);
        if (r >= 0)
                s->prepared = c->generation;
        return r;
}

static int execute(struct pg_conn *c, struct pg_stmt *s) {
        int r = usable(c);
        if (r < 0)
                return r;
        if (s->bind_err < 0) {
                sql_set_error(&c->base, "cannot bind a parameter: %s", strerror(-s->bind_err));
                return s->bind_err;
        }
        Oid types[s->nparams + 1];
        for (int i = 0; i < s->nparams; i++) {
                const struct pg_param *p = &s->params[i];
                s->values[i] = p->kind == P_NULL ? NULL : s->buf + p->off;
                s->lengths[i] = (int) p->len;
                s->formats[i] = p->kind == P_BLOB; /* bytea goes as binary, the rest as text */
                types[i] = param_type(s, i);
        }
        if (s->persistent && s->prepared != c->generation && (r = server_prepare(c, s)) < 0)
                return r;
        PGresult *res = s->persistent ? PQexecPrepared(c->pg, s->name, s->nparams, s->values,
                                                       s->lengths, s->formats, 0)
                                      : PQexecParams(c->pg, s->text, s->nparams, types, s->values,
                                                     s->lengths, s->formats, 0);
        ExecStatusType status = PQresultStatus(res);
        if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
                r = fail_result(c, res, NULL);
                PQclear(res);
                return r;
        }
        s->res = res;
        s->nrows = PQntuples(res);
        s->row = -1;
        const char *changed = PQcmdTuples(res);
        s->base.changes = changed && *changed ? strtoll(changed, NULL, 10) : 0;
        return 0;
}

static int pg_step(sql_stmt *st) {
        struct pg_stmt *s = ps(st);
        struct pg_conn *c = pc(st->conn);
        if (s->done) {
                /* Stepped again after its last row: run again, as SQLite does. */
                PQclear(s->res);
                s->res = NULL;
                s->done = false;
        }
        if (!s->res) {
                int r = execute(c, s);
                if (r < 0)
                        return r;
        }
        if (++s->row < s->nrows)
                return SQL_ROW;
        s->done = true;
        return SQL_DONE;
}

static bool pg_column_null(sql_stmt *st, int i) {
        struct pg_stmt *s = ps(st);
        if (!s->res || s->row < 0 || s->row >= s->nrows || i >= PQnfields(s->res))
                return true;
        return PQgetisnull(s->res, s->row, i);
}

static const char *raw(sql_stmt *st, int i) {
        struct pg_stmt *s = ps(st);
        if (pg_column_null(st, i))
                return NULL;
        const char *v = PQgetvalue(s->res, s->row, i);
        if (PQftype(s->res, i) == OID_BOOL)
                return *v == 't' ? "1" : "0";
        return v;
}

static int64_t pg_column_int64(sql_stmt *st, int i) {
        const char *v = raw(st, i);
        if (!v)
                return 0;
        if (strpbrk(v, ".eEIN")) {
                /* A numeric or a float: truncated toward zero, clamped, like SQLite. */
                double d = strtod(v, NULL);
                if (d != d)
                        return 0;
                if (d >= 9223372036854775807.0)
                        return INT64_MAX;
                if (d <= -9223372036854775808.0)
                        return INT64_MIN;
                return (int64_t) d;
        }
        return strtoll(v, NULL, 10);
}

static double pg_column_double(sql_stmt *st, int i) {
        const char *v = raw(st, i);
        return v ? strtod(v, NULL) : 0.0;
}

static const char *pg_column_text(sql_stmt *st, int i) {
        return raw(st, i);
}

static int hexval(char ch) {
        if (ch >= '0' && ch <= '9')
                return ch - '0';
        if (ch >= 'a' && ch <= 'f')
                return ch - 'a' + 10;
        if (ch >= 'A' && ch <= 'F')
                return ch - 'A' + 10;
        return -1;
}

/* Room for the decoded blob of column i. */
static unsigned char *blob_room(struct pg_stmt *s, int i, size_t len) {
        if (i >= s->nblob) {
                int n = i + 1;
                unsigned char **b = realloc(s->blob, (size_t) n * sizeof(*b));
                if (!b)
                        return NULL;
                s->blob = b;
                size_t *cap = realloc(s->blob_cap, (size_t) n * sizeof(*cap));
                if (!cap)
                        return NULL;
                s->blob_cap = cap;
                for (int k = s->nblob; k < n; k++) {
                        s->blob[k] = NULL;
                        s->blob_cap[k] = 0;
                }
                s->nblob = n;
        }
        if (s->blob_cap[i] < len + 1) {
                unsigned char *x = realloc(s->blob[i], len + 1);
                if (!x)
                        return NULL;
                s->blob[i] = x;
                s->blob_cap[i] = len + 1;
        }
        return s->blob[i];
}

static const void *pg_column_blob(sql_stmt *st, int i, size_t *ret_len) {
        struct pg_stmt *s = ps(st);
        const char *v = raw(st, i);
        *ret_len = 0;
        if (!v)
                return NULL;
        if (PQftype(s->res, i) != OID_BYTEA || strncmp(v, "\\x", 2) != 0) {
                *ret_len = strlen(v);
                return v;
        }
        size_t n = (strlen(v) - 2) / 2;
        unsigned char *out = blob_room(s, i, n);
        if (!out)
                return NULL;
        for (size_t k = 0; k < n; k++) {
                int hi = hexval(v[2 + 2 * k]), lo = hexval(v[3 + 2 * k]);
                if (hi < 0 || lo < 0)
                        return NULL;
                out[k] = (unsigned char) (hi << 4 | lo);
        }
        *ret_len = n;
        return out;
}

static int pg_column_count(sql_stmt *st) {
        struct pg_stmt *s = ps(st);
        return s->res ? PQnfields(s->res) : 0;
}

/* ---- COPY ---------------------------------------------------------------------------------- */

#define COPY_CHUNK (256 * 1024)

static int copy_begin(sql_conn *base, const char *table, const char *const *columns, size_t n) {
        struct pg_conn *c = pc(base);
        size_t size = strlen(table) + 64;
        for (size_t i = 0; i < n; i++)
                size += strlen(columns[i]) + 8;
        char *sql = malloc(size);
        if (!sql)
                return -ENOMEM;
        size_t len = (size_t) snprintf(sql, size, "COPY \"%s\" (", table);
        for (size_t i = 0; i < n; i++)
                len += (size_t) snprintf(sql + len, size - len, "%s\"%s\"", i ? ", " : "",
                                         columns[i]);
        snprintf(sql + len, size - len, ") FROM STDIN");
        int r = usable(c);
        PGresult *res = r < 0 ? NULL : PQexec(c->pg, sql);
        free(sql);
        if (r >= 0 && PQresultStatus(res) != PGRES_COPY_IN)
                r = fail_result(c, res, "cannot copy");
        PQclear(res);
        c->copy.len = 0;
        c->copy.field = 0;
        c->copy.error = 0;
        return r;
}

/* Room for n more bytes of the copy's rows (and a field's separator). */
static char *copy_room(struct pg_conn *c, size_t n) {
        if (c->copy.len + n + 2 > c->copy.cap) {
                size_t cap = MAX(c->copy.cap * 2, c->copy.len + n + 2);
                cap = MAX(cap, (size_t) COPY_CHUNK * 2);
                char *x = realloc(c->copy.buf, cap);
                if (!x) {
                        c->copy.error = c->copy.error ?: -ENOMEM;
                        return NULL;
                }
                c->copy.buf = x;
                c->copy.cap = cap;
        }
        if (c->copy.field++ > 0)
                c->copy.buf[c->copy.len++] = '\t';
        return c->copy.buf + c->copy.len;
}

static void copy_raw(struct pg_conn *c, const char *text, size_t n) {
        char *p = copy_room(c, n);
        if (p) {
                memcpy(p, text, n);
                c->copy.len += n;
        }
}

static void copy_int64(sql_conn *base, int64_t v) {
        char text[24];
        copy_raw(pc(base), text, (size_t) snprintf(text, sizeof(text), "%lld", (long long) v));
}

static void copy_double(sql_conn *base, double v) {
        char text[40];
        copy_raw(pc(base), text, (size_t) snprintf(text, sizeof(text), "%.17g", v));
}

static void copy_null(sql_conn *base) {
        copy_raw(pc(base), "\\N", 2);
}

/* Text with COPY's escapes of the backslash and the separators. */
static void copy_text(sql_conn *base, const char *s) {
        struct pg_conn *c = pc(base);
        size_t n = strlen(s);
        char *p = copy_room(c, 2 * n);
        if (!p)
                return;
        for (size_t i = 0; i < n; i++) {
                char ch = s[i], esc = ch == '\\'   ? '\\'
                                      : ch == '\t' ? 't'
                                      : ch == '\n' ? 'n'
                                      : ch == '\r' ? 'r'
                                                   : 0;
                if (esc) {
                        *p++ = '\\';
                        *p++ = esc;
                } else
                        *p++ = ch;
        }
        c->copy.len = (size_t) (p - c->copy.buf);
}

/* bytea in hex, its backslash escaped for COPY: \\x0a0b. */
static void copy_blob(sql_conn *base, const void *v, size_t n) {
        static const char hex[] = "0123456789abcdef";
        struct pg_conn *c = pc(base);
        char *p = copy_room(c, 3 + 2 * n);
        if (!p)
                return;
        *p++ = '\\';
        *p++ = '\\';
        *p++ = 'x';
        for (size_t i = 0; i < n; i++) {
                unsigned char b = ((const unsigned char *) v)[i];
                *p++ = hex[b >> 4];
                *p++ = hex[b & 15];
        }
        c->copy.len = (size_t) (p - c->copy.buf);
}

static int copy_flush(struct pg_conn *c) {
        if (c->copy.len > 0 && !c->copy.error &&
            PQputCopyData(c->pg, c->copy.buf, (int) c->copy.len) != 1) {
                set_message(c, "cannot copy", PQerrorMessage(c->pg));
                c->copy.error = -EIO;
        }
        c->copy.len = 0;
        return c->copy.error;
}

static int copy_row(sql_conn *base) {
        struct pg_conn *c = pc(base);
        /* copy_room() leaves room for this newline after each field. */
        if (c->copy.error || c->copy.field == 0)
                return c->copy.error ?: -EINVAL;
        c->copy.buf[c->copy.len++] = '\n';
        c->copy.field = 0;
        return c->copy.len >= COPY_CHUNK ? copy_flush(c) : c->copy.error;
}

static int copy_end(sql_conn *base) {
        struct pg_conn *c = pc(base);
        int r = copy_flush(c);
        if (PQputCopyEnd(c->pg, r < 0 ? "the copy failed" : NULL) != 1 && r >= 0) {
                set_message(c, "cannot end the copy", PQerrorMessage(c->pg));
                r = -EIO;
        }
        PGresult *res;
        while ((res = PQgetResult(c->pg))) {
                if (PQresultStatus(res) != PGRES_COMMAND_OK && r >= 0)
                        r = fail_result(c, res, "cannot copy");
                PQclear(res);
        }
        c->copy.field = 0;
        return r;
}

const struct sql_backend sql_pg_backend = {
        .name = "PostgreSQL",
        .dialect = SQL_PG,
        .open = pg_open,
        .close = pg_close,
        .exec = pg_exec,
        .begin = pg_begin,
        .end = pg_end,
        .in_txn = pg_in_txn,
        .prepare = pg_prepare,
        .finalize = pg_finalize,
        .reset = pg_reset,
        .bind_int64 = pg_bind_int64,
        .bind_double = pg_bind_double,
        .bind_text = pg_bind_text,
        .bind_blob = pg_bind_blob,
        .bind_null = pg_bind_null,
        .step = pg_step,
        .column_null = pg_column_null,
        .column_int64 = pg_column_int64,
        .column_double = pg_column_double,
        .column_text = pg_column_text,
        .column_blob = pg_column_blob,
        .column_count = pg_column_count,
        .copy_begin = copy_begin,
        .copy_int64 = copy_int64,
        .copy_double = copy_double,
        .copy_text = copy_text,
        .copy_blob = copy_blob,
        .copy_null = copy_null,
        .copy_row = copy_row,
        .copy_end = copy_end,
};
