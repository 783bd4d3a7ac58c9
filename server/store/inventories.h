/* SPDX-License-Identifier: MIT */
/* The versions of the machines' inventories (table inventories, schema 11): stored by ingest
 * with the upload that carries them, once per run and version, and read back per machine. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "db.h"
#include "inventory-model.h"
#include "sql.h"
#include "summary.h"

/* Stores s's inventory versions of run (the farm's row id), received at now_ns; a version
 * stored before is kept as it was.  Inside the caller's write transaction. */
int farm_inventories_store(sql_conn *c, int64_t run, const struct summary *s, int64_t now_ns,
                           char *err);

/* Each machine's newest version among its runs of release, stamped by at and received by known
 * (as farm_inventories_of() orders them), ascending by machine; machines without one left out. */
int farm_inventories_of_release(sql_conn *c, const char *release, int64_t at, int64_t known,
                                int64_t tolerance_ns, struct farm_machine_inventory **ret,
                                size_t *ret_n, char *err);

/* Every version of machine's runs (of release only, unless NULL) received by known_ns
 * (INT64_MAX: all), in the order the
 * machine went through them: its runs by their start as the server takes it (a start stamped
 * beyond tolerance_ns after the run arrived counts from the arrival), each run's versions in
 * its order.  A stored version whose fields do not read back is an error naming it. */
int farm_inventories_of(sql_conn *c, const char *machine, const char *release, int64_t known_ns,
                        int64_t tolerance_ns, struct farm_inventory_version **ret, size_t *ret_n,
                        char *err);
