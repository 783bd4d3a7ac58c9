/* SPDX-License-Identifier: MIT */
/* Fuzz target for rtsoakd's configuration file (the INI parser, every key's parser, the
 * rotation and the scenarios' Load= lines): any file is refused with a message that says
 * where, or loaded into a configuration that prints and loads again to the same text. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "daemon-config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The text in a memory file, named by its /proc path: the parser reads files by name. */
static int memory_file(const void *data, size_t size, char path[static 64]) {
        int fd = memfd_create("fuzz-config", MFD_CLOEXEC);
        if (fd < 0)
                abort();
        if (size > 0 && write(fd, data, size) != (ssize_t) size)
                abort();
        snprintf(path, 64, "/proc/self/fd/%d", fd);
        return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char path[64], path2[64], err[CONF_ERROR_MAX] = "";
        struct daemon_config c, again;

        int fd = memory_file(data, size, path);
        int r = daemon_config_load(&c, path, true, NULL, NULL, err);
        close(fd);
        if (r < 0) {
                /* A refusal always says why. */
                if (err[0] == '\0')
                        abort();
                daemon_config_free(&c);
                return 0;
        }
        /* What was accepted prints as a configuration that loads to the same text:
         * --check-config's output can always be used as a configuration file. */
        char *text = daemon_config_text(&c);
        if (!text)
                abort();
        fd = memory_file(text, strlen(text), path2);
        r = daemon_config_load(&again, path2, true, NULL, NULL, err);
        close(fd);
        if (r < 0) {
                fprintf(stderr, "printed configuration refused: %s\n%s", err, text);
                abort();
        }
        char *text2 = daemon_config_text(&again);
        if (!text2 || strcmp(text, text2) != 0) {
                fprintf(stderr, "printed configuration differs:\n%s---\n%s", text, text2);
                abort();
        }
        free(text);
        free(text2);
        daemon_config_free(&again);
        daemon_config_free(&c);
        return 0;
}
